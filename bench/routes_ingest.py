"""Issue 5, part a: what a coalescing route costs at ingest, next to a plain route.

`busbar web` and valkey only (no worker), so every event stays queued and a coalescing
route finds the url it replaces. Two subscribers, each on its own topic with the same
route except `coalesce`; the same events are published to each, the two kinds
interleaved and their order swapped every round. Before each measurement the
subscriber is re-created (nothing queued) and primed with one cycle of the urls, so a
cycling workload measures replacements only and the plain route appends only.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import redis

from app.services.counters import totals
from bench.common import Bus

# name: (events per POST, distinct urls cycled over; 0 = every event a new url)
WORKLOADS: dict[str, tuple[int, int]] = {
    "bulk 500, updates cycling over 300 urls": (500, 300),
    "bulk 500, every url new (coalescing misses)": (500, 0),
    "single events, updates cycling over 300 urls": (1, 300),
}
KINDS: dict[str, dict[str, Any]] = {"plain": {}, "coalescing": {"coalesce": True}}
CLIENTS = {500: 1, 1: 8}  # publishing threads, by events per POST: singles need several


def urls_of(tag: str, urls: int, start: int, count: int) -> list[str]:
    """Event urls start..start+count, cycling over `urls` of them, or all distinct."""
    return [
        f"https://o.test/{tag}/{(start + i) % urls if urls else start + i}" for i in range(count)
    ]


def bodies(urls: list[str], size: int) -> list[Any]:
    """POST bodies of `size` events (a bare event object when 1, as publishers send it)."""
    events = [{"type": "update", "url": u, "data": {"v": i}} for i, u in enumerate(urls)]
    if size == 1:
        return events
    return [events[i : i + size] for i in range(0, len(events), size)]


def publish_all(the_bus: Bus, topic: str, payloads: list[Any], threads: int) -> float:
    """Seconds to publish every body, each thread on its own keep-alive connection."""
    barrier, errors = threading.Barrier(threads + 1), []

    def run(mine: list[Any]) -> None:
        with contextlib.closing(the_bus.api("pub")) as api:
            barrier.wait()
            for body in mine:
                status, answer = api.call("POST", f"/topics/{topic}", body)
                if status != 204:
                    errors.append(f"{status} {answer[:200]!r}")

    pool = [
        threading.Thread(target=run, args=(payloads[t::threads],), daemon=True)
        for t in range(threads)
    ]
    for thread in pool:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in pool:
        thread.join()
    if errors:
        raise RuntimeError(f"{len(errors)} publishes failed, first: {errors[0]}")
    return time.perf_counter() - started


def resubscribe(the_bus: Bus, topic: str, kind: str) -> None:
    """A fresh subscriber (DELETE drops what is queued and the coalescing map)."""
    the_bus.unsubscribe(f"sub_{kind}")
    route = {"topic": topic, **KINDS[kind]}
    body = {"topics": [route], "callback": "http://127.0.0.1:9/in", "max": 100, "timeout": 500}
    with contextlib.closing(the_bus.api(f"sub_{kind}")) as api:
        api.ok("POST", "/subscription", body)


def measure(the_bus: Bus, kind: str, workload: str, count: int) -> dict:
    """One kind, one workload: events/s, CPU us per event of web and valkey, and the
    share of events that replaced a queued one."""
    size, urls = WORKLOADS[workload]
    topic, tag = f"t_{kind}", f"{kind}{time.monotonic_ns()}"
    resubscribe(the_bus, topic, kind)
    if urls:  # one cycle first: from then on every coalescing event finds its url
        publish_all(the_bus, topic, bodies(urls_of(tag, urls, 0, urls), max(size, urls)), 1)
    payloads = bodies(urls_of(tag, urls, urls, count), size)
    with redis.Redis.from_url(the_bus.redis_url) as client:
        before = int(totals(client, the_bus.keys).get(b"events.coalesced", 0))
        cpu0 = the_bus.cpu()
        elapsed = publish_all(the_bus, topic, payloads, CLIENTS[size])
        cpu1 = the_bus.cpu()
        coalesced = int(totals(client, the_bus.keys).get(b"events.coalesced", 0)) - before
    us = {k: (cpu1[k] - cpu0[k]) / count * 1e6 for k in ("web", "redis")}
    return {"rate": count / elapsed, "us": us["web"] + us["redis"], **us, "coalesced": coalesced}


def run_ingest(the_bus: Bus, rounds: int, counts: dict[int, int]) -> dict[str, dict[str, list]]:
    """runs[workload][kind] = one measurement per round; `counts`: events per
    measurement by events per POST."""
    the_bus.client("pub").close()
    for kind in KINDS:
        the_bus.client(f"sub_{kind}").close()
    runs: dict[str, dict[str, list]] = {w: {k: [] for k in KINDS} for w in WORKLOADS}
    try:
        for workload in WORKLOADS:  # warm-up: connections, script cache
            for kind in KINDS:
                measure(the_bus, kind, workload, 1_000 if WORKLOADS[workload][0] > 1 else 50)
        for r in range(rounds):
            order = list(KINDS) if r % 2 == 0 else list(reversed(KINDS))
            for workload, (size, _) in WORKLOADS.items():
                for kind in order:
                    one = measure(the_bus, kind, workload, counts[size])
                    runs[workload][kind].append(one)
                    print(f"round {r} {workload} {kind}: {one}", flush=True)
    finally:
        for kind in KINDS:
            the_bus.unsubscribe(f"sub_{kind}")
    return runs
