"""The longest single Lua script at the documented maxima: Redis runs one script at a
time, so every other client (publishers, workers, heartbeats) waits for the longest.

Each case builds its state on a fresh valkey (the pip wheel's), then runs the operation
through busbar's own services with SLOWLOG recording every command; the figure is the
longest EVALSHA of the operation, server-side (SLOWLOG's microseconds, no network), and
the operation's total time from the client for scale.

    .venv/bin/python -m bench.scripts [--quick]
"""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TypeVar

import redis

from app.delivery.callback import CallbackClient, Timeouts
from app.delivery.flight import Flight
from app.delivery.steps import AsyncDelivery
from app.lua import AsyncScripts, Scripts, _sources
from app.models.attempt_result import CONFIRMED, AttemptResult, answered
from app.models.callback_policy import LOOPBACK_OPEN
from app.models.deadletters import DeadLetters
from app.models.event import Event
from app.models.keys import Keys, keys_for
from app.models.queue import JobQueue
from app.models.sealed import Sealer
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore
from app.redis_client import connect_async
from app.services.ingest import Ingest
from app.services.shedding import Shedding
from bench import common
from config.settings import Settings
from dev import redis_server

T = TypeVar("T")
COMMAND = ".venv/bin/python -m bench.scripts"
LIMIT_MS = 50
BULK = 500


@dataclass
class World:
    client: redis.Redis
    keys: Keys
    scripts: Scripts
    settings: Settings

    @property
    def store(self) -> SubscriberStore:
        return SubscriberStore(self.client, self.keys, self.scripts)

    @property
    def ingest(self) -> Ingest:
        return Ingest(self.client, self.keys, self.scripts, self.settings)

    def subscribe(self, token: str, topic: str, **extra: object) -> None:
        body = {"topics": [topic], "callback": "http://127.0.0.1:9/in", **extra}
        self.store.subscribe(
            token, parse_subscription(body, allow_http=True, policy=LOOPBACK_OPEN), now()
        )

    def publish(self, topic: str, count: int, ttl_urls: str = "o") -> None:
        for start in range(0, count, BULK):
            events = [
                Event("update", f"https://{ttl_urls}.test/{i}", now(), {"i": i})
                for i in range(start, min(count, start + BULK))
            ]
            self.ingest.publish(topic, "pub", events)

    def flight(self, token: str) -> Flight:
        shard = self.keys.shard_of(token)
        job = JobQueue(self.client, self.keys, self.scripts, "main", shard).acquire("bench/0", 1)
        assert job is not None
        flight = self.engine(lambda delivery: delivery.begin(token, "bench/0", job))
        assert isinstance(flight, Flight), flight
        return flight

    def finish(self, flight: Flight, status: AttemptResult) -> None:
        self.engine(lambda delivery: delivery.finish(flight, status, go_on=False))

    def engine(self, step: Callable[[AsyncDelivery], Awaitable[T]]) -> T:
        """One step of the engine's delivery (app/delivery/steps.py), as a slot runs it;
        no HTTP here: the scripts are what is measured."""

        async def run() -> T:
            url = f"redis://127.0.0.1:{self.client.connection_pool.connection_kwargs['port']}/0"
            client = connect_async(replace(self.settings, redis_url=url), connections=2)
            scripts = AsyncScripts(client, 1)
            http = CallbackClient(policy=LOOPBACK_OPEN, timeouts=Timeouts(1.0, 1.0))  # unused
            try:
                return await step(AsyncDelivery(self.keys, scripts, self.settings, http))
            finally:
                await scripts.close()
                await http.close()
                await client.aclose()

        return asyncio.run(run())


def now() -> int:
    return int(time.time() * 1000)


def fan_out(w: World, n: int) -> Callable[[], object]:
    for i in range(n):
        w.subscribe(f"s{i}", "orders")
    events = [Event("update", f"https://o.test/{i}", now(), {"i": i}) for i in range(BULK)]
    return lambda: w.ingest.publish("orders", "pub", events)


def at_the_cap(w: World, coalesce: bool) -> Callable[[], object]:
    """One publish of BUSBAR_MAX_PUBLISH_EVENTS events to one subscriber; on a coalescing
    route, every one of them replacing a queued event of its url (the costliest path)."""
    body = {"topics": [{"topic": "big", "coalesce": coalesce}],
            "callback": "http://127.0.0.1:9/in", "timeout": 3_600_000}  # fmt: skip
    w.store.subscribe("big", parse_subscription(body, allow_http=True, policy=LOOPBACK_OPEN), now())
    cap = w.settings.max_publish_events
    if coalesce:
        w.publish("big", cap)
    events = [Event("update", f"https://o.test/{i}", now(), {"i": -i}) for i in range(cap)]
    return lambda: w.ingest.publish("big", "pub", events)


def delete_backlog(w: World, n: int, max_events: int) -> Callable[[], object]:
    w.subscribe("big", "big", max=max_events, timeout=3_600_000)
    w.publish("big", n)
    return lambda: w.store.delete("big")


def expire_backlog(w: World, n: int, entire: bool) -> Callable[[], object]:
    """n events that expire after a second, with live ones between (entire mode reads
    them all, head mode stops at the first live one: its worst case is all expired)."""
    body = {
        "topics": [{"topic": "big", "ttl": 1}, {"topic": "live"}],
        "callback": "http://127.0.0.1:9/in",
        "timeout": 3_600_000,
    }
    w.store.subscribe("big", parse_subscription(body, allow_http=True, policy=LOOPBACK_OPEN), now())
    w.publish("big", n)
    if entire:
        w.publish("live", n // 10)
    later = now() + 10_000
    return lambda: Shedding(w.client, w.keys, w.scripts, w.settings).expire(later, entire)


def autodrop(w: World, n: int) -> Callable[[], object]:
    for i in range(100):
        w.subscribe(f"s{i}", f"t_{chr(97 + i // 26)}{chr(97 + i % 26)}")
    for i in range(100):
        w.publish(f"t_{chr(97 + i // 26)}{chr(97 + i % 26)}", n // 100)
    used = int(w.client.info("memory")["used_memory"])
    # most of what is queued must go: free memory is far below the floor
    tight = Settings(redis_max_mem=used, redis_min_free=used // 4, delivery_log=False)
    return lambda: Shedding(w.client, w.keys, w.scripts, tight).autodrop(now())


def big_batch(w: World, n: int, status: AttemptResult) -> Callable[[], object]:
    w.subscribe("big", "big", max=n, timeout=0, max_attempts=1)
    w.publish("big", n)
    flight = w.flight("big")
    return lambda: w.finish(flight, status)


def gathered_flight(w: World, n: int) -> Callable[[], object]:
    """A broker flight of n one-event batches (`max: 1`; lib/delivery.lua's gather),
    every message confirmed: its ack acknowledges each batch."""
    destination = {"type": "nats", "url": "nats://127.0.0.1:9", "subject": "s"}
    body = {"topics": ["gathered"], "max": 1, "timeout": 0, "destination": destination}
    sub = parse_subscription(body, allow_http=True, policy=LOOPBACK_OPEN)
    assert sub.destination is not None
    stored = sub.destination.stored(Sealer(b"s" * 32), "gathered", now())
    w.store.subscribe("gathered", sub, now(), destination=stored)
    w.publish("gathered", n)
    flight = w.flight("gathered")
    assert len(flight.every_entry) == n, len(flight.every_entry)
    flight.confirmed[:] = [n]
    return lambda: w.finish(flight, CONFIRMED)


def replay(w: World, n: int) -> Callable[[], object]:
    big_batch(w, n, answered(500))()
    return lambda: DeadLetters(w.client, w.keys, w.scripts).replay("big", now())


def cases(quick: bool) -> dict[str, Callable[[World], Callable[[], object]]]:
    big = 10_000 if quick else 100_000
    cap = Settings().max_publish_events
    fans = 50 if quick else 500
    return {
        f"bulk publish, {BULK} events to {fans} subscribers": partial(fan_out, n=fans),
        f"publish at the cap, {cap:,} events (BUSBAR_MAX_PUBLISH_EVENTS), 1 subscriber": partial(
            at_the_cap, coalesce=False
        ),
        f"publish at the cap, {cap:,} events on a coalescing route, each replacing one": partial(
            at_the_cap, coalesce=True
        ),
        f"delete a subscriber with {big:,} queued events, max 1": partial(
            delete_backlog, n=big, max_events=1
        ),
        f"delete a subscriber with {big:,} queued events, max 100": partial(
            delete_backlog, n=big, max_events=100
        ),
        f"Expire {big:,} expired events of one subscriber, head mode": partial(
            expire_backlog, n=big, entire=False
        ),
        f"Expire {big:,} expired events among {big // 10:,} live ones, entire mode": partial(
            expire_backlog, n=big, entire=True
        ),
        f"Autodrop {2 * big:,} events over 100 subscribers": partial(autodrop, n=2 * big),
        "ack of a 10,000-event batch (delivery log on)": partial(
            big_batch, n=10_000, status=answered(200)
        ),
        "fail of a 10,000-event batch into dead letters": partial(
            big_batch, n=10_000, status=answered(500)
        ),
        "replay 10,000 dead letters": partial(replay, n=10_000),
        "ack of a broker flight of 100 one-event batches (max 1, delivery log on)": partial(
            gathered_flight, n=100
        ),
    }


def names_by_sha() -> dict[str, str]:
    return {hashlib.sha1(text.encode()).hexdigest(): name for name, text in _sources().items()}


def longest_script(client: redis.Redis, shas: dict[str, str]) -> tuple[float, str, int]:
    """(longest EVALSHA in ms, its script, how many ran) from the SLOWLOG."""
    entries = client.slowlog_get(1_000_000)
    runs = [
        (e["duration"] / 1000, shas.get(e["command"].split(b" ")[1].decode(), "?"))
        for e in entries
        if e["command"].startswith(b"EVALSHA ")
    ]
    longest = max(runs, default=(0.0, "-"))
    return longest[0], longest[1], len(runs)


def run_case(make: Callable[[World], Callable[[], object]]) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="busbar-bench-") as work:
        server = redis_server.start(Path(work), persistent=False)
        try:
            client = redis.Redis.from_url(server.url)
            # the state is built as fast as it can be: no publish rate (BUSBAR_PUBLISH_RATE)
            settings = Settings(allow_http=True, publish_rate=0)
            keys = keys_for(settings)
            world = World(client, keys, Scripts(client), settings)
            TokenStore(client, keys).create("pub", "pub")
            operation = make(world)
            client.config_set("slowlog-log-slower-than", 0)
            client.config_set("slowlog-max-len", 1_000_000)
            client.slowlog_reset()
            started = time.perf_counter()
            operation()
            total = (time.perf_counter() - started) * 1000
            client.config_set("slowlog-log-slower-than", 10_000)
            longest, script, calls = longest_script(client, names_by_sha())
            client.close()
        finally:
            server.stop()
    return {"longest_ms": longest, "script": script, "calls": calls, "total_ms": total}


def report(command: str, runs: dict[str, list[dict]], rounds: int) -> str:
    lines = [
        "# Longest single Lua script at the documented maxima",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        "Each case on a fresh valkey (pip wheel); the operation runs through busbar's own "
        "services with SLOWLOG recording every command. Longest: the longest single "
        "EVALSHA of the operation, server-side. Calls: the scripts it took. Total: the "
        f"whole operation from the client. Aim: every script under {LIMIT_MS} ms. Median "
        f"(min-max) of {rounds} round(s).",
        "",
        "| case | longest script, ms | which | calls | total, ms |",
        "|---|---|---|---|---|",
    ]
    for case, got in runs.items():
        lines.append(
            f"| {case} | {common.spread([r['longest_ms'] for r in got], '{:.1f}')} "
            f"| {got[-1]['script']} | {got[-1]['calls']} "
            f"| {common.spread([r['total_ms'] for r in got], '{:,.0f}')} |"
        )
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> None:
    quick = common.quick_flag("bench.scripts", __doc__, argv)
    rounds = 1 if quick else 3
    runs: dict[str, list[dict]] = {}
    for case, make in cases(quick).items():
        runs[case] = [run_case(make) for _ in range(rounds)]
        print(f"{case}: {runs[case]}", flush=True)
    command = COMMAND + (" --quick" if quick else "")
    common.write_report("scripts", report(command, runs, rounds))
    worst = max(runs.items(), key=lambda kv: max(r["longest_ms"] for r in kv[1]))
    common.write_headlines("scripts", [
        ("longest single script at the maxima",
         f"{common.spread([r['longest_ms'] for r in worst[1]], '{:.1f}')} ms ({worst[0]})"),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
