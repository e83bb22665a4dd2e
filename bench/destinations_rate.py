"""Events/s into a broker (bench.destinations' first measurement): one `busbar worker`
at `max: 1` and `max: 100` against this process publishing the same messages with the
broker's Python client in a plain loop, each confirm awaited (what the worker does, so
the ratio is busbar's overhead over the bare client, not a different protocol; SQS's
client has a call per message and one per ten: each busbar case against its own).

N events published in bulk to a paused subscriber, which is then resumed: events/s is
N-1 over the time from the first to the last message stored, as the broker's Target
tells it. The baseline publishes the messages a warm-up run stored (bodies, subjects or
routing keys, ids, headers), timed the same way. The cases take turns round by
round, each on a fresh stream or queue and subscriber; the ratio is taken within a
round, then the median.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Iterator
from functools import partial
from typing import Any

from bench import common
from bench.destinations_bus import (
    MAX_1,
    MAX_100,
    Cpu,
    Retries,
    Stored,
    Target,
    events,
    listing,
    pids,
    publish,
    rounded,
    subscribe,
    wait_for,
)

Runs = dict[str, list[dict[str, Any]]]


def busbar_run(
    the_bus: common.Bus, target: Target, n: int, count: int, batch: int
) -> dict[str, Any]:
    """N events published to a paused subscriber, then resumed: events/s from the first
    to the last message stored, CPU per event."""
    target.fresh(n)
    token, topic = subscribe(the_bus, n, target.destination(n), max=batch)
    with contextlib.closing(the_bus.api(token)) as api:
        api.ok("POST", "/subscriber/pause")
        publish(the_bus, topic, events(count))
        common.wait_quiet()
        cpu = Cpu(pids(the_bus, target))
        api.ok("POST", "/subscriber/resume")
    wait_for(lambda: target.count(n) >= count, f"{count} events in {target.name} {n}")
    used, other = cpu.used()
    first, last = target.span(n, count)
    stored, sent = target.count(n), listing(the_bus, token)["events"]["sent"]
    the_bus.unsubscribe(token)
    target.remove(n)
    return {
        "events/s": (count - 1) / (last - first), "stored": stored, "sent": sent,
        "publisher CPU ms/event": used["worker"] * 1e3 / count,
        "broker CPU µs/msg": used["broker"] * 1e6 / count, "other cores": other,
    }  # fmt: skip


def baseline_run(
    the_bus: common.Bus, target: Target, n: int, messages: list[Stored], baseline: str
) -> dict[str, Any]:
    """The same messages from this process, each confirm awaited in turn (`baseline`:
    which of the target's loops)."""
    target.fresh(n)
    common.wait_quiet()
    cpu = Cpu(pids(the_bus, target))
    own = target.publish_loop(n, messages, baseline)
    used, other = cpu.used()
    sent = len(messages)
    wait_for(lambda: target.count(n) >= sent, f"the baseline's {sent} in {target.name} {n}")
    first, last = target.span(n, sent)
    stored = target.count(n)
    target.remove(n)
    return {
        "events/s": (sent - 1) / (last - first), "stored": stored, "sent": sent,
        "publisher CPU ms/event": own * 1e3 / sent,
        "broker CPU µs/msg": used["broker"] * 1e6 / sent, "other cores": other,
    }  # fmt: skip


def warm_up(the_bus: common.Bus, target: Target, n: int, count: int) -> list[Stored]:
    """N events through busbar at `max: 100`: the messages the baseline publishes."""
    target.fresh(n)
    token, topic = subscribe(the_bus, n, target.destination(n), max=100)
    publish(the_bus, topic, events(count))
    wait_for(lambda: target.count(n) >= count, f"the warm-up's {count} events")
    messages = target.read(n)[:count]
    the_bus.unsubscribe(token)
    target.remove(n)
    return messages


def throughput(
    the_bus: common.Bus, target: Target, count: int, rounds: int, numbers: Iterator[int],
    retries: Retries,
) -> tuple[Runs, float]:  # fmt: skip
    """The warm-up, then the cases (busbar's two, the baseline or baselines) taking
    turns, round by round; and a message's median size (bytes)."""
    messages = warm_up(the_bus, target, next(numbers), count)
    cases = (MAX_1, MAX_100, *dict.fromkeys(target.baselines.values()))
    runs: Runs = {case: [] for case in cases}

    def measured(case: str) -> dict[str, Any]:  # a fresh stream or queue each time
        if case not in (MAX_1, MAX_100):
            return baseline_run(the_bus, target, next(numbers), messages, case)
        batch = 1 if case == MAX_1 else 100
        return busbar_run(the_bus, target, next(numbers), count, batch)

    for r in range(rounds):
        for case in cases[r % len(cases) :] + cases[: r % len(cases)]:
            one = retries.steady(partial(measured, case))
            runs[case].append(one)
            print(f"{target.name}, round {r + 1} {case}: {rounded(one)}", flush=True)
    return runs, statistics.median(len(m.data) for m in messages)


def ratios(runs: Runs, case: str, baseline: str) -> list[float]:
    """events/s of `case` over the baseline's, round by round."""
    base = runs[baseline]
    return [a["events/s"] / b["events/s"] for a, b in zip(runs[case], base, strict=True)]
