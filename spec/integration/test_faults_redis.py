"""Fault tests, Redis side, with real processes on loopback: Redis crashing and coming
back under load (AOF, appendfsync always), and Redis running short of memory."""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from pathlib import Path

import redis

from spec.integration.bus import bus, events, fast_scrub
from spec.integration.faults import (
    Publisher,
    metric,
    numbers,
    own_redis,
    replays,
    wait_for_numbers,
)
from spec.integration.processes import wait_until
from spec.integration.subscriber import Subscriber, serving

SCRUB_AFTER_S = 3
# how Redis goes down, and for how long: the last outage outlasts BUSBAR_SCRUB_AFTER_MS,
# so every worker's heartbeat is stale when Redis comes back
OUTAGES = [("kill -9", 2.0), ("SIGTERM", 2.0), ("kill -9", SCRUB_AFTER_S + 2.0)]


def test_redis_crash_and_restart_lose_no_acknowledged_publish(tmp_path: Path) -> None:
    """A 204 is a promise: with appendfsync always, an event acknowledged to its publisher
    is on disk, and web and worker ride out the outage (503s, retries) without a restart."""
    released = threading.Event()
    subs = {
        "a": Subscriber(responder=lambda _: (200, 0.05)),
        # refuses everything until Redis is back for good: its backlog lives only in Redis
        "b": Subscriber(responder=lambda _: (200 if released.is_set() else 500, 0.0)),
    }
    env = {**fast_scrub(SCRUB_AFTER_S * 1000), "BUSBAR_DELIVERY_CONCURRENCY": "2"}
    with ExitStack() as stack:
        own = stack.enter_context(own_redis(tmp_path / "redis", True, appendfsync="always"))
        for sub in subs.values():
            stack.enter_context(serving(sub))
        b = stack.enter_context(bus(own.url, tmp_path, workers=2, **env))
        b.client("pub")
        for name, sub in subs.items():
            b.client(name)
            b.subscribe(name, sub.url, ["orders"], max=10, timeout=200)
        outages = []
        with Publisher(b.base, "pub", "orders") as publisher:
            for stop, outage in OUTAGES:
                acked, got = len(publisher.acked), len(numbers(subs["a"]))
                wait_until(
                    lambda a=acked, g=got: (
                        len(publisher.acked) > a + 200 and len(numbers(subs["a"])) > g
                    ),
                    60,
                    "publishing and delivery to go on",
                )
                down = time.monotonic()
                if stop == "kill -9":
                    own.crash()
                else:
                    own.stop()
                time.sleep(outage)
                own.start()
                acked = len(publisher.acked)
                wait_until(
                    lambda a=acked: len(publisher.acked) > a, 60, "publishes to succeed again"
                )
                outages.append(time.monotonic() - down)
        wanted = set(publisher.acked)
        released.set()
        for name, sub in subs.items():
            wait_for_numbers(sub, wanted, 90, f"subscriber {name} after the restarts")
        assert all(w.poll() is None for w in b.workers)  # the same processes, never restarted
        assert b.call("GET", "/pulse", "pub").status_code == 204
        # every heartbeat was stale when Redis came back: yet no live job was handed out twice
        assert all(sub.max_in_flight == 1 for sub in subs.values())

    found = {name: replays(sub) for name, sub in subs.items()}
    print(
        f"\n{len(wanted)} acknowledged events, publish answers {dict(publisher.statuses)}, "
        f"outages {[round(s, 1) for s in outages]} s, events delivered twice "
        f"{ {n: r.events for n, r in found.items()} } (not in a whole batch sent again: "
        f"{ {n: r.partial for n, r in found.items()} })"
    )
    # while Redis is down a publish waits for it or is refused with 503, never a 500
    assert set(publisher.statuses) <= {"204", "503"}


def test_memory_pressure_sheds_the_lowest_lane_while_ingest_keeps_answering(
    tmp_path: Path,
) -> None:
    """Under BUSBAR_REDIS_MAX_MEM, Autodrop makes room (delivery log first, then the
    oldest batches of the lowest lane) before Redis's own maxmemory refuses writes: every
    publish answers 204, a high-priority subscriber that keeps up loses nothing, and
    every event dropped for the stalled low-priority one is counted."""
    mib = 1 << 20
    with ExitStack() as stack:
        # no maxmemory yet: measure what an empty server uses, then give busbar 5 MiB, of
        # which web's and worker's connections take about 1 and Autodrop keeps 2 free
        own = stack.enter_context(own_redis(tmp_path / "redis", False))
        client = redis.Redis.from_url(own.url)
        max_mem = int(client.info("memory")["used_memory"]) + 5 * mib
        # Redis refuses writes 2 MiB beyond busbar's budget: Autodrop has to hold the line
        client.config_set("maxmemory", max_mem + 2 * mib)
        client.config_set("maxmemory-policy", "noeviction")
        env = {
            "BUSBAR_REDIS_MAX_MEM": str(max_mem),
            "BUSBAR_REDIS_MIN_FREE": str(mib),
            "BUSBAR_AUTODROP_INTERVAL": "1",
            "BUSBAR_MAX_EVENT_DATA": "1024",
        }
        fast = stack.enter_context(serving())
        b = stack.enter_context(bus(own.url, tmp_path, **env))
        b.client("pub"), b.client("fast"), b.client("stalled")
        b.subscribe("fast", fast.url, [{"topic": "orders", "priority": 0}], max=20, timeout=100)
        b.subscribe("stalled", "http://127.0.0.1:9/down", ["orders"], max=100, timeout=60_000)
        idle = int(client.info("memory")["used_memory"])
        with Publisher(b.base, "pub", "orders", chunk=20, pause=0.01, padding=500) as publisher:
            wait_until(lambda: metric(b.base, "busbar_events_autodropped_total") > 0, 60,
                       "Autodrop to shed")  # fmt: skip
            time.sleep(10)  # and go on publishing while it sheds again and again
        wanted = set(publisher.acked)

        def per_subscriber() -> dict[str, int]:
            return {
                name: int(client.hget(b.keys.subscriber(name), "autodropped") or 0)
                for name in ("fast", "stalled")
            }

        try:
            wait_for_numbers(fast, wanted, 60, "the high-priority subscriber")
        except AssertionError as exc:  # say whether Autodrop took them, or nothing did
            raise AssertionError(f"{exc}; autodropped: {per_subscriber()}") from None
        dropped = metric(b.base, "busbar_events_autodropped_total")
        stalled = b.subscription("stalled")
        used = int(client.info("memory")["used_memory"])
        dropped_by = per_subscriber()

    print(
        f"\n{len(wanted)} events published ({dict(publisher.statuses)}), {dropped:.0f} dropped "
        f"{dropped_by}, stalled queue {stalled['events']['queued']}, "
        f"used {used / mib:.1f} MiB (idle bus {idle / mib:.1f}) of a {max_mem / mib:.1f} MiB budget"
    )
    assert publisher.statuses == {"204": len(wanted) // publisher.chunk}
    assert dropped_by == {"fast": 0, "stalled": dropped}
    assert stalled["events"]["queued"] + dropped == len(wanted)  # queued or counted, no third way


def test_deliveries_begun_after_redis_is_back_are_never_repeated(tmp_path: Path) -> None:
    """Redis is killed and started again while the worker's connections to it are idle.
    Every delivery begun once it is back is made once: a settle is never written to a
    connection the old server closed, failed, and its job given back (which sent a batch
    the subscriber had acknowledged again, a second later, with no fault to explain it;
    app/lua/pipe.py). Ten subscribers, so the engine has used several connections."""
    subs = {f"s{i}": Subscriber(responder=lambda _: (200, 0.01)) for i in range(10)}
    with ExitStack() as stack:
        own = stack.enter_context(own_redis(tmp_path / "redis", True, appendfsync="always"))
        for sub in subs.values():
            stack.enter_context(serving(sub))
        b = stack.enter_context(bus(own.url, tmp_path, workers=1))
        b.client("pub")
        for name, sub in subs.items():
            b.client(name)
            b.subscribe(name, sub.url, ["orders"], max=1, timeout=0)
        b.publish("pub", "orders", events(30))
        for name, sub in subs.items():
            wait_for_numbers(sub, set(range(30)), 30, f"{name} before the restart")
        for stop in ("kill -9", "SIGTERM"):
            # received is not yet acknowledged: an ack the stop cut off would send its
            # batch again after the restart, which the check below would count
            for name in subs:
                wait_until(lambda n=name: b.subscription(n)["events"]["queued"] == 0, 30,
                           f"{name}'s acknowledgements before the {stop}")  # fmt: skip
            if stop == "kill -9":
                own.crash()
            else:
                own.stop()
            time.sleep(1.0)
            own.start()
            wait_until(lambda: b.call("GET", "/pulse", "pub").status_code == 204, 30, "Redis")
            time.sleep(1.5)  # the worker's idle connections have seen the old server go
            back = time.monotonic()
            start = 1000 if stop == "kill -9" else 2000
            for n in range(5):
                b.publish("pub", "orders", events(10, start + 10 * n))
            wanted = set(range(start, start + 50))
            for name, sub in subs.items():
                wait_for_numbers(sub, wanted, 60, f"{name} after the restart ({stop})")
            time.sleep(2.0)  # a job given back would be sent again about a second later
            for name, sub in subs.items():
                after = [
                    e["data"]["i"] for r in sub.received if r.started >= back for e in r.events
                ]
                repeats = [
                    (round(r.started - back, 3), [e["data"]["i"] for e in r.events])
                    for r in sub.received if r.started >= back
                ]  # fmt: skip
                assert sorted(after) == sorted(wanted), (name, stop, repeats)
