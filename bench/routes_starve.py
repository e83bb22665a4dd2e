"""Issue 5, part c: how long lower-lane events wait under a steady higher-lane load.

One subscriber that takes DELAY seconds to answer each POST (a subscriber doing work),
max MAX events, timeout 0, two routes: topic H on priority 0, topic L on priority 9.
Its capacity C (events/s through one delivery in flight) is measured each round from a
burst of full batches. Then, for each load factor f, H gets f x C events/s (POSTs of
MAX events, so every batch is full) and L a trickle of single events, for WINDOW
seconds; both stop together and everything is awaited. Delivery always picks the
highest lane first, so below C the low lane gets the slots the high lane leaves idle,
and above C it gets none until the high lane's backlog is gone.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from bench import common
from bench.common import Api, Bus, Sink

DELAY = 0.01  # seconds the subscriber takes per request
MAX = 10  # events per batch
WAIT_S = 120.0  # most a load waits for its last event (bounded runtime)
HIGH, LOW = 0, 9
SUBSCRIPTION = {"max": MAX, "timeout": 0, "topics": [
    {"topic": "t_high", "priority": HIGH}, {"topic": "t_low", "priority": LOW},
]}  # fmt: skip


def body(lane: int, i: int, size: int) -> Any:
    """`size` events (a bare event when 1) stamped with their lane and send time."""
    data = {"s": [lane, time.time() * 1e3]}
    events = [
        {"type": "create", "url": f"https://o.test/{lane}/{i}-{n}", "data": data}
        for n in range(size)
    ]
    return events[0] if size == 1 else events


def capacity(the_bus: Bus, sink: Sink, events: int) -> float:
    """Events/s the subscriber takes from a queue of full high-lane batches."""
    sink.take()
    start = sink.received
    api = the_bus.api("pub")
    for i in range(0, events, 500):
        api.ok("POST", "/topics/t_high", body(HIGH, i, 500))
    api.close()
    sink.wait_for(start + events, WAIT_S)
    received = sorted(at for at, _ in common.by_lane(sink.take(), (HIGH, LOW))[HIGH])
    return (len(received) - MAX) / (received[-1] - received[0]) * 1e3  # the first batch's


def load(the_bus: Bus, sink: Sink, high_rate: float, low_rate: float, seconds: float) -> dict:
    """High lane at high_rate events/s and low lane at low_rate for `seconds`."""
    sink.take()
    sizes: dict[int, list[int]] = {HIGH: [], LOW: []}  # one entry per POST sent
    start = sink.received
    connect = lambda: the_bus.api("pub")  # noqa: E731

    def stream(lane: int, rate: float, size: int, threads: int) -> None:
        def send(api: Api, i: int) -> None:
            api.ok("POST", f"/topics/t_{'high' if lane == HIGH else 'low'}", body(lane, i, size))
            sizes[lane].append(size)

        common.paced(rate / size, connect, send, int(rate * seconds / size), threads)

    pool = [
        threading.Thread(target=stream, args=(HIGH, high_rate, MAX, 2), daemon=True),
        threading.Thread(target=stream, args=(LOW, low_rate, 1, 1), daemon=True),
    ]
    began = time.time() * 1e3 + 50
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    stopped = time.time() * 1e3
    sent = {lane: sum(posts) for lane, posts in sizes.items()}
    complete = sink.wait_for(start + sent[HIGH] + sent[LOW], WAIT_S)
    lanes = common.by_lane(sink.take(), (HIGH, LOW))
    low_wait = [at - s for at, s in lanes[LOW]]
    return {
        "complete": complete and len(lanes[LOW]) == sent[LOW],
        "offered": sent[HIGH] / (stopped - began) * 1e3,
        "high_delivered": sum(at <= stopped for at, _ in lanes[HIGH]) / (stopped - began) * 1e3,
        "high_p50": common.pct([at - s for at, s in lanes[HIGH]], 50),
        "low_sent": sent[LOW],
        "low_during": sum(at <= stopped for at, _ in lanes[LOW]),
        "low_wait": low_wait,
        "low_after_stop_s": (max(at for at, _ in lanes[LOW]) - stopped) / 1e3,
    }


def run_starvation(the_bus: Bus, sink: Sink, rounds: int, factors: tuple[float, ...],
                   seconds: float, low_rate: float, burst: int) -> dict[str, Any]:  # fmt: skip
    """capacities: one per round; loads[f]: one measurement per round."""
    the_bus.client("pub").close()
    with contextlib.closing(the_bus.client("sub")) as sub:
        callback = f"http://127.0.0.1:{sink.port}/s"
        sub.ok("POST", "/subscription", SUBSCRIPTION | {"callback": callback})
    out: dict[str, Any] = {"capacity": [], "loads": {f: [] for f in factors}}
    try:
        capacity(the_bus, sink, 500)  # warm-up: connections, script cache
        for r in range(rounds):
            out["capacity"].append(cap := capacity(the_bus, sink, burst))
            for f in factors:
                out["loads"][f].append(one := load(the_bus, sink, f * cap, low_rate, seconds))
                shown = {k: v for k, v in one.items() if k != "low_wait"}
                print(f"round {r} starvation {f}x {cap:.0f}/s: {shown}", flush=True)
    finally:
        the_bus.unsubscribe("sub")
    return out
