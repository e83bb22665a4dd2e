"""Erasing one url among many queued events (issue 56): how long it takes, and what it
costs the publishes that go on meanwhile.

`SUBSCRIBERS` subscribers (paused: a worker runs, for the erasure's job, but delivers
nothing) each get the same `EVENTS` events queued, one in `EVERY` of them about the url
to erase. Then, with the worker running, single-event publishes go at a steady `RATE`
to another topic for `SECONDS` (the baseline), and again while the erasure runs, until
its receipt says done: the publishes' latency percentiles side by side, and the
erasure's time and what it removed.

    .venv/bin/python -m bench.erasure                       # 1,000 x 1,000: a million queued
    .venv/bin/python -m bench.erasure --subscribers 100 --events 1000   # quicker
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
from pathlib import Path

from bench import common
from bench.common import Bus
from bench.measure import pct, spread

URL = "https://people.test/erased"
BULK = 100


def setup(the_bus: Bus, subscribers: int, events: int, every: int) -> None:
    """The subscribers, paused, then the events in bulk publishes (the url's among them)."""
    with contextlib.closing(the_bus.client("pub")) as pub:
        pub.ok("POST", "/topics/t_other", {"type": "create", "url": "https://o.test/warm"})
    for i in range(subscribers):
        with contextlib.closing(the_bus.client(f"s{i}")) as sub:
            topics = ["t_people", "t_other"] if i == 0 else ["t_people"]
            sub.ok("POST", "/subscription", {"topics": topics, "callback": "http://127.0.0.1:9/in"})
            sub.ok("POST", "/subscriber/pause")
    with contextlib.closing(the_bus.api("pub")) as pub:
        for start in range(0, events, BULK):
            body = [
                {"type": "update", "url": URL if n % every == 0 else f"https://o.test/{n}",
                 "data": {"n": n, "email": f"person{n}@example.test"}}
                for n in range(start, min(start + BULK, events))
            ]  # fmt: skip
            pub.ok("POST", "/topics/t_people", body)


def publishing(the_bus: Bus, rate: float, going: object) -> list[float]:
    """Single-event publishes at `rate` while going(): each one's latency, ms."""
    took: list[float] = []

    def send(api: common.Api, i: int) -> None:
        start = time.perf_counter()
        api.ok("POST", "/topics/t_other", {"type": "create", "url": f"https://o.test/p/{i}"})
        took.append((time.perf_counter() - start) * 1e3)

    common.paced(rate, lambda: the_bus.api("pub"), send, going=going)  # type: ignore[arg-type]
    return took


def erase(the_bus: Bus, rate: float) -> tuple[float, dict, list[float]]:
    """Ask for the erasure and publish until it is done: (seconds, receipt, latencies)."""
    with contextlib.closing(the_bus.api()) as root:
        receipt = json.loads(root.ok("POST", "/erasures", {"url": URL}))
        started, state = time.perf_counter(), {"receipt": receipt}

        def going() -> bool:
            with contextlib.closing(the_bus.api()) as api:
                state["receipt"] = json.loads(api.ok("GET", f"/erasures/{receipt['id']}"))
            return state["receipt"]["state"] != "done"

        took = publishing(the_bus, rate, going)
        return time.perf_counter() - started, state["receipt"], took


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.erasure")
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--every", type=int, default=100, help="one event in EVERY is the url's")
    parser.add_argument("--rate", type=float, default=100.0, help="publishes per second")
    parser.add_argument("--seconds", type=float, default=15.0, help="of the baseline")
    parser.add_argument("--cluster", type=int, default=0, help="masters of a local cluster")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work, common.web_bus(Path(work), args.cluster) as b:
        began = time.perf_counter()
        setup(b, args.subscribers, args.events, args.every)
        queued = args.subscribers * args.events
        print(f"{queued:,} events queued for {args.subscribers:,} subscribers in "
              f"{time.perf_counter() - began:.0f} s", flush=True)  # fmt: skip
        with common.worker(b):
            deadline = time.perf_counter() + args.seconds
            quiet = publishing(b, args.rate, lambda: time.perf_counter() < deadline)
            seconds, receipt, busy = erase(b, args.rate)
    removed = receipt["stores"]["queued"]["events"]
    print(
        f"erasure: {removed:,} of the url's events removed from {queued:,} queued in "
        f"{seconds:.1f} s ({receipt['passes']} pass(es))"
    )
    for name, took in (("without", quiet), ("during", busy)):
        print(f"publish {name} the erasure: p50 {pct(took, 50):.1f} ms, p99 "
              f"{pct(took, 99):.1f} ms, max {max(took):.1f} ms ({len(took)} publishes; "
              f"{spread(took, '{:.1f}')})")  # fmt: skip
    print(f"p99 during / without: {pct(busy, 99) / pct(quiet, 99):.2f}x")


if __name__ == "__main__":
    main()
