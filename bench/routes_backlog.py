"""Issue 5, part b: latency of priority-0 events while a priority-9 backlog drains.

One subscriber (max 100, timeout 0, so a lane-0 event is due at once) with two routes:
topic A on priority 9, topic B on priority 0. Each round: first the baseline (worker
running, nothing queued, priority-0 events at a steady pace), then the worker stops, the
backlog is published to A, a new worker starts and priority-0 events go to B at the
same pace until the backlog has arrived. Every event carries [lane, send time in ms].
Only one delivery is in flight per subscriber, so a priority-0 event waits at most for
the priority-9 batch in flight: that wait, not the backlog's size, is what it should pay.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from bench import common
from bench.common import Api, Bus, Sink

BULK = 500
WAIT_S = 120.0  # bounded: a run that does not finish in this long is reported as such
SUBSCRIPTION = {"max": 100, "timeout": 0, "topics": [
    {"topic": "t_backlog", "priority": 9}, {"topic": "t_urgent", "priority": 0},
]}  # fmt: skip


def stamped(lane: int) -> dict[str, list[float]]:
    """An event's data: its lane and the time it was sent, read back by the sink."""
    return {"s": [lane, time.time() * 1e3]}


def urgent(the_bus: Bus, rate: float, sent: list[int], **pace: Any) -> list[float]:
    """Paced single priority-0 publishes; returns how late each started (s)."""

    def send(api: Api, i: int) -> None:
        event = {"type": "create", "url": f"https://o.test/u/{i}", "data": stamped(0)}
        api.ok("POST", "/topics/t_urgent", event)
        sent.append(i)

    return common.paced(rate, lambda: the_bus.api("pub"), send, **pace)


def baseline(the_bus: Bus, sink: Sink, rate: float, seconds: float) -> list[float]:
    """Priority-0 latencies (ms) with nothing else queued."""
    sink.take()
    start, sent = sink.received, list[int]()
    urgent(the_bus, rate, sent, count=int(rate * seconds))
    sink.wait_for(start + len(sent), WAIT_S)
    return [at - s for at, s in common.by_lane(sink.take(), (0, 9))[0]]


def publish_backlog(the_bus: Bus, count: int) -> None:
    """The priority-9 backlog, in POSTs of BULK, while no worker runs."""
    with contextlib.closing(the_bus.api("pub")) as api:
        for i in range(0, count, BULK):
            urls = range(i, min(i + BULK, count))
            data = stamped(9)
            body = [{"type": "create", "url": f"https://o.test/b/{n}", "data": data} for n in urls]
            api.ok("POST", "/topics/t_backlog", body)


def drain(the_bus: Bus, sink: Sink, backlog: int, rate: float | None) -> dict[str, Any]:
    """Start a worker on the queued backlog; with a `rate`, publish priority-0 events
    until the backlog has arrived and keep the latencies of those sent before its last
    event was received. CPU per backlog event shows where a slower drain went."""
    sink.take()
    start, sent, late = sink.received, list[int](), list[float]()
    spawned = time.time() * 1e3
    with common.worker(the_bus):
        cpu0 = the_bus.cpu()
        if rate:
            going = lambda: sink.received < start + backlog + len(sent)  # noqa: E731
            late = urgent(the_bus, rate, sent, going=going)
        complete = sink.wait_for(start + backlog + len(sent), WAIT_S)
        cpu1 = the_bus.cpu()
        lanes = common.by_lane(sink.take(), (0, 9))
    first, last = min(at for at, _ in lanes[9]), max(at for at, _ in lanes[9])
    return {
        "complete": complete and len(lanes[9]) == backlog,
        "drain_s": (last - first) / 1e3,
        "from_spawn_s": (last - spawned) / 1e3,
        "latency": [at - s for at, s in lanes[0] if s < last],
        "late_p99": common.pct(late, 99) * 1e3 if late else 0.0,
        "cpu_us": {k: (cpu1[k] - cpu0[k]) / backlog * 1e6 for k in cpu1},
    }


def run_backlog(the_bus: Bus, sink: Sink, rounds: int, backlog: int, rate: float,
                seconds: float) -> list[dict[str, Any]]:  # fmt: skip
    """One entry per round: baseline latencies, the backlog drained alone, and drained
    again while priority-0 events arrive (with their latencies)."""
    the_bus.client("pub").close()
    the_bus.client("sub").ok(
        "POST", "/subscription", SUBSCRIPTION | {"callback": f"http://127.0.0.1:{sink.port}/s"}
    )
    runs = []
    try:
        for r in range(rounds):
            with common.worker(the_bus):
                if r == 0:  # warm-up: connections, script cache
                    baseline(the_bus, sink, rate, 0.5)
                quiet = baseline(the_bus, sink, rate, seconds)
            publish_backlog(the_bus, backlog)
            alone = drain(the_bus, sink, backlog, None)
            publish_backlog(the_bus, backlog)
            runs.append({"baseline": quiet, "alone": alone, **drain(the_bus, sink, backlog, rate)})
            print(f"round {r} backlog: {common.spread(runs[-1]['latency'], '{:.1f}')} ms "
                  f"(baseline {common.spread(quiet, '{:.1f}')}), drain {runs[-1]['drain_s']:.1f} "
                  f"s (alone {alone['drain_s']:.1f} s)", flush=True)  # fmt: skip
    finally:
        the_bus.unsubscribe("sub")
    return runs
