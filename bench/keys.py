"""Ordering keys (issue 37): many deliveries in flight for one subscriber, each key in
order. One `busbar worker` with its defaults, one subscriber whose callback answers every
POST after 50 ms and takes any number at once (an asyncio server in its own process,
keep-alive, accept backlog 128), `max: 1`, `timeout: 0`.

Cases, taking turns round by round so a drift of the machine falls on all alike:
- `concurrency 1`: the baseline, today's one delivery in flight, on 400 events over 40
  urls (at ~19 events/s more would only take longer to say the same);
- `concurrency 64`: 4,000 events over 400 urls;
- `poisoned, 16`: concurrency 16, 2,000 events over 100 urls of which one is answered
  500 every time, against `healthy, 16`, the same without it.

Every subscription has `max_attempts: 3`, so the poisoned key's batches go to the dead
letters after three attempts. Measured per round: events/s of every key but the
poisoned one (publish to the last arrival), its partition mates included: since issue
53 a failing key steps aside and they go on (docs/internals.md, Keys set aside); and
how many events share its partition and when the last of them arrived; the most
requests in flight at once at the subscriber; requests that held a key another request
in flight held (must be 0); urls whose events arrived out of publish order (must be 0);
events missing or repeated (must be 0); the worker's CPU per delivered event (ms). Every
round uses a fresh subscriber.

    .venv/bin/python -m bench.keys [--quick]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NamedTuple

from app.models import partitions
from bench import common

COMMAND = ".venv/bin/python -m bench.keys"
TOPIC = "keys_bench"
ANSWER_S = 0.05


def poison_url(concurrency: int = 16, urls: int = 100) -> str:
    """A url for the poisoned key that shares its partition with as many of the case's
    urls as any partition holds (5 of the 100 over 64 partitions), so its partition
    mates are measured: the name used before shared its partition with none of them."""
    n = partitions.count(concurrency)
    held = Counter(partitions.partition_of(f"https://o.test/{i}", n) for i in range(urls))
    crowded = held.most_common(1)[0][0]
    names = (f"https://o.test/poison{j}" for j in range(10_000))
    return next(url for url in names if partitions.partition_of(url, n) == crowded)


POISON = poison_url()
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
FAILED = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"


class Case(NamedTuple):
    label: str
    concurrency: int
    events: int
    urls: int
    poisoned: bool = False


CASES = (
    Case("concurrency 1", 1, 400, 40),
    Case("concurrency 64", 64, 4000, 400),
    Case("healthy, 16", 16, 2000, 100),
    Case("poisoned, 16", 16, 2000, 100, poisoned=True),
)


class Origin:
    """What the subscriber saw, under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.arrivals: list[tuple[float, list[tuple[str, int]]]] = []
        self.holding: dict[str, int] = defaultdict(int)
        self.now = self.most = self.overlaps = 0

    def enter(self, events: list[tuple[str, int]]) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            keys = {url for url, _ in events}
            self.overlaps += any(self.holding[k] for k in keys)
            for k in keys:
                self.holding[k] += 1

    def leave(self, at: float, events: list[tuple[str, int]], ok: bool) -> None:
        with self.lock:
            self.now -= 1
            for k in {url for url, _ in events}:
                self.holding[k] -= 1
            if ok:
                self.arrivals.append((at, events))

    def take(self) -> dict[str, Any]:
        with self.lock:
            taken = {"arrivals": self.arrivals, "most": self.most, "overlaps": self.overlaps}
            self.arrivals, self.most, self.overlaps = [], 0, 0
        return taken


async def answer(
    origin: Origin, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """HTTP/1.1 keep-alive by hand, on the loop: a thread per connection (http.server)
    cost this subscriber more CPU than the worker under test at 1,000 requests/s on two
    cores, and would have measured itself."""
    try:
        while head := await reader.readuntil(b"\r\n\r\n"):
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            events = [
                (e["url"], e["data"]["i"]) for e in json.loads(await reader.readexactly(length))
            ]
            origin.enter(events)
            ok = all(url != POISON for url, _ in events)
            try:
                await asyncio.sleep(ANSWER_S)
            finally:
                origin.leave(time.time(), events, ok)
            writer.write(OK if ok else FAILED)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def serve(port_out: Connection, control: Connection) -> None:
    """The subscriber, in its own process: 200 after ANSWER_S, 500 for the poisoned url."""
    origin = Origin()
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(
        lambda r, w: answer(origin, r, w), "127.0.0.1", 0, backlog=128))  # fmt: skip
    threading.Thread(target=loop.run_forever, daemon=True).start()
    port_out.send(server.sockets[0].getsockname()[1])
    while control.recv() == "take":
        control.send(origin.take())


def one_round(bus: common.Bus, control: Connection, port: int, case: Case, n: int) -> dict:
    name = f"k{n}"
    api = bus.client(name)
    api.ok("POST", "/subscription", {"topics": [TOPIC], "callback": f"http://127.0.0.1:{port}/",
           "max": 1, "timeout": 0, "concurrency": case.concurrency, "max_attempts": 3})  # fmt: skip
    events = [{"type": "update", "url": f"https://o.test/{i % case.urls}", "data": {"i": i}}
              for i in range(case.events)]  # fmt: skip
    if case.poisoned:
        for i in range(0, case.events, case.urls):
            events[i]["url"] = POISON
    healthy = [e for e in events if e["url"] != POISON]
    # the keys that share the poisoned key's partition wait behind it (docs/semantics.md)
    n_parts = partitions.count(case.concurrency)
    behind = partitions.partition_of(POISON, n_parts)
    apart = {str(e["url"]) for e in healthy if n_parts == 1
             or partitions.partition_of(str(e["url"]), n_parts) != behind}  # fmt: skip
    control.send("take")
    control.recv()
    cpu = common.cpu_seconds(bus.pids["worker"])
    with contextlib.closing(bus.api("pub")) as pub:
        start = time.time()
        for i in range(0, len(events), 1000):
            pub.ok("POST", f"/topics/{TOPIC}", events[i : i + 1000])
    got: list[tuple[float, list[tuple[str, int]]]] = []
    most = overlaps = 0
    deadline = time.monotonic() + 600
    while sum(len(e) for _, e in got) < len(healthy) and time.monotonic() < deadline:
        time.sleep(0.2)
        control.send("take")
        seen = control.recv()
        got += seen["arrivals"]
        most, overlaps = max(most, seen["most"]), overlaps + seen["overlaps"]
    cpu = common.cpu_seconds(bus.pids["worker"]) - cpu
    delivered = [(at, url, i) for at, evs in got for url, i in evs]
    ahead = [at for at, url, _ in delivered if url in apart]
    shared = [at for at, url, _ in delivered if url not in apart]
    order: dict[str, list[int]] = defaultdict(list)
    for _, url, i in delivered:
        order[url].append(i)
    api.call("DELETE", "/subscriber")
    api.close()
    numbers = [i for _, _, i in delivered]
    return {
        "events/s": len(delivered) / max(1e-6, max(at for at, _, _ in delivered) - start),
        "others' events/s": len(ahead) / max(1e-6, max(ahead) - start),
        "most in flight": most,
        "key overlaps": overlaps,
        "urls out of order": sum(v != sorted(v) for v in order.values()),
        "missing or repeated": len(healthy) - len(set(numbers)) + len(numbers) - len(healthy),
        "worker CPU ms/event": 1000 * cpu / max(1, len(delivered)),
        "sharing the partition": len(shared) if case.concurrency > 1 else 0,
        "their last, s": (max(shared) - start) if shared and case.concurrency > 1 else 0.0,
    }


def main(argv: list[str] | None = None) -> None:
    quick = common.quick_flag("bench.keys", __doc__, argv)
    rounds = 1 if quick else 3
    cases = [c._replace(events=c.events // 4) for c in CASES] if quick else list(CASES)
    origin, port, control = common.server_process(serve)
    rows: dict[str, list[dict]] = {c.label: [] for c in cases}
    with tempfile.TemporaryDirectory() as work, common.bus(Path(work)) as bus:
        bus.client("pub").close()  # the topic's one publisher
        n = 0
        for r in range(rounds + 1):  # the first: warm-up, not counted
            for case in cases:
                n += 1
                result = one_round(bus, control, port, case, n)
                print(f"round {r} {case.label}: {json.dumps(result)}", flush=True)
                if r:
                    rows[case.label].append(result)
    control.send("stop")
    origin.terminate()
    report(rows, rounds)


def report(rows: dict[str, list[dict]], rounds: int) -> None:
    def med(label: str, field: str) -> float:
        return statistics.median(r[field] for r in rows[label])

    base, wide = med("concurrency 1", "events/s"), med("concurrency 64", "events/s")
    kept = med("poisoned, 16", "events/s") / med("healthy, 16", "events/s")
    cpu = med("concurrency 64", "worker CPU ms/event") / med("concurrency 1", "worker CPU ms/event")
    lines = [
        "# Ordering keys: deliveries in flight per subscriber (issue 37)",
        "",
        f"`{COMMAND}`, {common.machine()}; median of {rounds} rounds after a warm-up, cases",
        "taking turns. One worker, defaults; one subscriber answering in 50 ms, `max: 1`,",
        "`timeout: 0`. Key overlaps, urls out of order and missing or repeated events must",
        "all be 0.",
        "",
        "| case | " + " | ".join(next(iter(rows.values()))[0]) + " |",
        "|---" * (1 + len(next(iter(rows.values()))[0])) + "|",
        *(
            f"| {label} | "
            + " | ".join(common.spread([r[f] for r in runs], "{:,.1f}") for f in runs[0])
            + " |"
            for label, runs in rows.items()
        ),
        "",
        f"- `concurrency: 64` against 1: **{wide:,.0f}** events/s against {base:,.1f} "
        f"({wide / base:,.1f}x); worker CPU per event {cpu:.2f}x the baseline's.",
        f"- A poisoned key among 100 (concurrency 16): every other key, its partition mates "
        f"included, arrives at **{100 * kept:.0f}%** of the rate without it; the "
        f"{med('poisoned, 16', 'sharing the partition'):.0f} events sharing its partition "
        f"go on while it steps aside, the last arriving after "
        f"{med('poisoned, 16', 'their last, s'):.1f} s (without it: "
        f"{med('healthy, 16', 'their last, s'):.1f} s).",
        "",
    ]
    common.write_report("keys", "\n".join(lines))
    common.write_headlines(
        "keys",
        [
            ("Ordering keys: events/s, concurrency 64 vs 1 (50 ms subscriber, max 1)",
             f"{wide:,.0f} vs {base:,.1f} ({wide / base:,.0f}x)"),
            ("Ordering keys: every other key's rate beside a poisoned key (concurrency 16)",
             f"{100 * kept:.0f}% of healthy"),
        ],
    )  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
