"""A short outage at every `concurrency` (issue 53, aim 1): the endpoint answers 503
without Retry-After for 1.5 s, then 204 again; one event a url over 40 urls is queued
while it is down (it answered an event just before, as an endpoint that blips has). How
long after the endpoint's return does the last event arrive?

Cases, each with its own `busbar worker` and a fresh subscriber, at `concurrency` 1, 4,
16 and 64: `defaults` (the circuit opens on an outage: failures in a row spanning
BUSBAR_CIRCUIT_OUTAGE_MS, 5 s) beside `count only` (BUSBAR_CIRCUIT_OUTAGE_MS=0: the
circuit opened on ten failures in a row, however quickly they came, as before issue 53).
Each case is repeated --rounds times (default 3); the report gives the median and range.

    .venv/bin/python -m bench.blip [--quick] [--rounds N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path

from bench import common

COMMAND = ".venv/bin/python -m bench.blip"
TOPIC = "blip_bench"
URLS = 40
OUTAGE_S = 1.5
CAP_S = 60.0  # a case not drained by then is reported as over it
CONCURRENCY = (1, 4, 16, 64)
MODES = {"defaults": {}, "count only": {"BUSBAR_CIRCUIT_OUTAGE_MS": "0"}}


def serve(port_out: Connection, control: Connection) -> None:
    """The subscriber, in its own process: 503 until `down_until`, then 204, recording
    when each (run, i) was first acknowledged. Control: ("down", run, s) starts an
    outage and answers when it ends; ("acked", run) answers (count, last ack time)."""
    lock = threading.Lock()
    state = {"down_until": 0.0}
    acked: dict[tuple[int, int], float] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            now = time.time()
            ok = now >= state["down_until"]
            if ok:
                with lock:
                    for e in json.loads(body):
                        acked.setdefault((e["data"]["run"], e["data"]["i"]), now)
            self.send_response(204 if ok else 503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port_out.send(server.server_address[1])
    while (ask := control.recv()) is not None:
        if ask[0] == "down":
            state["down_until"] = time.time() + ask[2]
            control.send(state["down_until"])
        else:
            with lock:
                times = [t for (r, _), t in acked.items() if r == ask[1]]
            control.send((len(times), max(times, default=0.0)))


def acked(pipe: Connection, run: int) -> int:
    """How many events of `run` the subscriber acknowledged."""
    pipe.send(("acked", run))
    return int(pipe.recv()[0])


def one_round(bus: common.Bus, pipe: Connection, port: int, concurrency: int, run: int) -> float:
    """Seconds from the endpoint's return to the last event's acknowledgement."""
    with contextlib.closing(bus.client(f"b{run}")) as api:
        sub = {"topics": [TOPIC], "callback": f"http://127.0.0.1:{port}/", "max": 1,
               "timeout": 0, "concurrency": concurrency}  # fmt: skip
        api.ok("POST", "/subscription", sub)
        with contextlib.closing(bus.api("pub")) as pub:  # up before the outage, as in life
            pub.ok("POST", f"/topics/{TOPIC}", {"type": "noop", "url": "https://o.test/w",
                                               "data": {"run": -run, "i": 0}})  # fmt: skip
        while not acked(pipe, -run):
            time.sleep(0.02)
        pipe.send(("down", run, OUTAGE_S))
        back_at = pipe.recv()
        with contextlib.closing(bus.api("pub")) as pub:
            events = [{"type": "update", "url": f"https://o.test/{i}", "data": {"run": run, "i": i}}
                      for i in range(URLS)]  # fmt: skip
            pub.ok("POST", f"/topics/{TOPIC}", events)
        while True:
            pipe.send(("acked", run))
            count, last = pipe.recv()
            if count >= URLS:
                break
            if time.time() > back_at + CAP_S:
                last = float("inf")
                break
            time.sleep(0.05)
        api.call("DELETE", "/subscriber")
    return max(0.0, last - back_at)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.blip", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one round a case")
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    origin, port, pipe = common.server_process(serve)
    results: dict[str, dict[int, list[float]]] = {}
    run = 0
    with tempfile.TemporaryDirectory() as work, common.web_bus(Path(work)) as bus:
        base = dict(bus.env)
        bus.client("pub").close()
        for mode, env in MODES.items():
            bus.env = {**base, **env}
            results[mode] = {c: [] for c in CONCURRENCY}
            with common.worker(bus):
                for _ in range(rounds):
                    for concurrency in CONCURRENCY:
                        run += 1
                        took = one_round(bus, pipe, port, concurrency, run)
                        results[mode][concurrency].append(took)
                        print(f"{mode}, concurrency {concurrency}: {took:.2f} s", flush=True)
    pipe.send(None)
    origin.terminate()
    report(results, rounds)


def shown(values: list[float]) -> str:
    if any(v == float("inf") for v in values):
        return f"over {CAP_S:.0f} s in {sum(v == float('inf') for v in values)} of {len(values)}"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def report(results: dict[str, dict[int, list[float]]], rounds: int) -> None:
    lines = [
        "# A 1.5 s outage at every concurrency (issue 53)",
        "",
        f"`{COMMAND}{'' if rounds == 3 else f' --rounds {rounds}'}`, {common.machine()}. The "
        f"endpoint answers 503 without Retry-After for {OUTAGE_S:g} s while {URLS} events "
        "(one a url) are queued, then 204; seconds from its return to the last event's "
        f"acknowledgement, median (min-max) of {rounds} round(s); one worker, defaults but "
        "for the mode's.",
        "",
        "| concurrency | " + " | ".join(MODES) + " |",
        "|---|" + "---|" * len(MODES),
        *(f"| {c} | " + " | ".join(shown(results[m][c]) for m in MODES) + " |"
          for c in CONCURRENCY),
        "",
    ]  # fmt: skip
    common.write_report("blip", "\n".join(lines))
    common.write_headlines(
        "blip",
        [(f"A {OUTAGE_S:g} s outage, last event after the return (s), concurrency 64: "
          "defaults vs count only",
          f"{shown(results['defaults'][64])} vs {shown(results['count only'][64])}")],
    )  # fmt: skip


if __name__ == "__main__":
    main()
