"""A profile's samples by the parts of the work they belong to (for bench.profile).

A flame graph's widest frames are its spine (the thread, the event loop, the slot), and
its self times are spread over hundreds of small functions; what a reader asks is how
much each step of a delivery or a publish costs. Each part here is named by the frames
that begin it, and a sample goes to the first part, in table order, with one of those
frames anywhere on its stack, so the parts add up to the whole. A frame is matched by
the start of py-spy's `name (file:line)`, without the line: a part renamed in the code
shows 0 here until its table follows.
"""

from __future__ import annotations

from collections import Counter

from bench.profile_spy import Stacks

Parts = list[tuple[str, tuple[str, ...]]]  # (part, frames that begin it)

WORKER: Parts = [
    ("maintenance thread (aux jobs: Expire, Autodrop, Monitor, scrubs)",
     ("JobRunner.run (workers/runner.py",)),
    ("scheduler, heartbeat and tickers",
     ("Scheduler.run (workers/", "Ticker.run (workers/", "ScrubTicker.run (workers/",
      "Heartbeat.run (workers/")),
    ("signing and the request body (Standard Webhooks HMACs, JSON)",
     ("headers (app/services/signing.py", "traced_body (app/delivery/plan.py")),
    ("the callback exchange: request written, answer read, origins",
     ("post (app/delivery/steps.py", "Connection.data_received (app/delivery/http1.py",
      "Connection.eof_received (app/delivery/http1.py")),
    ("acknowledging: the ack script's arguments, its call and reply",
     ("AsyncDelivery.finish (app/delivery/",)),
    ("taking and beginning a batch: the take and begin scripts, the slots' turns",
     ("Slot._take (app/delivery/", "AsyncDelivery.begin (app/delivery/")),
    ("the scripts' pipe to Redis: batched writes, replies read",
     ("Pipe._run (app/lua/", "Pipe._kick (app/lua/", "StreamReaderProtocol.data_received (asyncio/",
      "AbstractConnection._send_packed_command (redis/")),
    ("the rest of the engine (slots, steps, the event loop)", ("Engine.run (app/delivery/",)),
]  # fmt: skip

WEB: Parts = [
    ("the topic step's Redis round trip (held connection: check, send, read)",
     ("HeldScript.run (app/lua/held.py",)),
    ("decoding and checking the events (JSON, event rules)",
     ("parse_events (app/models/event.py", "decode_json (app/web/body.py")),
    ("building the topic step: events packed, keys and arguments (Ingest.publish)",
     ("Ingest.publish (app/services/ingest.py",)),
    ("the rest of the fast path: credentials, throttle, client, answer",
     ("FastPublish.__call__ (app/web/publish.py",)),
    ("reading the request (request line, headers, WSGI environ)",
     ("DeadlineHandler.read_request (", "DeadlineHandler.read_requestline (",
      "DeadlineHandler.get_environ (")),
    ("writing the response (status, headers, Date, send)",
     ("WSGIHandler.process_result (gevent/", "WSGIHandler.start_response (gevent/")),
    ("the rest of gevent's server (handler, log line, hub)", ("WSGIServer.handle (gevent/",)),
]  # fmt: skip


def split(stacks: Stacks, parts: Parts) -> Counter[str]:
    """Samples by part; those of none under `other`."""
    found: Counter[str] = Counter()
    for frames, count in stacks.items():
        found[next((name for name, starts in parts
                    if any(f.startswith(starts) for f in frames)), "other")] += count  # fmt: skip
    return found


def table(stacks: Stacks, parts: Parts) -> str:
    """The parts in table order, each with its share of the samples."""
    every = max(1, sum(stacks.values()))
    found = split(stacks, parts)
    rows = [f"  {100 * found[name] / every:5.1f}%  {found[name]:7,}  {name}"
            for name in [*(p for p, _ in parts), "other"]]  # fmt: skip
    return "\n".join(["by part (a sample to the first part on its stack):", *rows])
