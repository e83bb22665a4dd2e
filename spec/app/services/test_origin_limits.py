"""What the workers report of their callback origins, read back as root sees it: summed
over live workers, a silent worker's report left out, reports forgotten long ago
deleted by the next report, and a worker's own removed when it leaves."""

from __future__ import annotations

import asyncio
import json

import redis

from app.models.keys import Keys
from app.redis_client import connect_async
from app.services import origin_limits
from app.services.origin_limits import ORIGINS_FORGET_MS, ORIGINS_STALE_MS, OriginRow
from config.settings import Settings


def row(
    origin: str, limit: int, open_: int, waiting: int, changed_ms: int, reason: str
) -> OriginRow:
    return OriginRow(origin, limit, 4096, open_, 1, waiting, 50.0, reason, changed_ms)


def reported(settings: Settings, keys: Keys, worker: str, rows: list[OriginRow], at: int) -> None:
    async def go() -> None:
        client = connect_async(settings, connections=2)
        try:
            await origin_limits.report(client, keys, worker, rows, at)
        finally:
            await client.aclose()

    asyncio.run(go())


def test_workers_reports_are_summed_by_origin(
    redis_client: redis.Redis, keys: Keys, settings: Settings
):
    now = 10_000_000
    first = [row("http://a:80", 100, 90, 5, 4000, "answers in time"),
             row("https://b:443", 64, 2, 0, 9000, "start")]  # fmt: skip
    reported(settings, keys, "w1", first, now - 1000)
    reported(settings, keys, "w2", [row("http://a:80", 80, 70, 0, 500, "answered 503")], now)
    rows = origin_limits.read(redis_client, keys, now)
    assert [r.origin for r in rows] == ["http://a:80", "https://b:443"]  # the busiest first
    a = rows[0]
    assert (a.limit, a.open, a.waiting, a.workers) == (180, 160, 5, 2)
    assert (a.reason, a.changed_ms) == ("answered 503", 500)  # the latest change
    assert rows[1].changed_ms == 10_000  # its age at the report, and the report's since
    metrics = {m.name: m.samples for m in origin_limits.metrics(rows)}
    assert metrics["origin.connections.limit"][(("origin", "http://a:80"),)] == 180


def test_a_silent_worker_is_left_out_and_an_old_report_forgotten(
    redis_client: redis.Redis, keys: Keys, settings: Settings
):
    now = 100_000_000
    reported(settings, keys, "gone", [row("http://a:80", 10, 1, 0, 0, "start")],
             now - ORIGINS_FORGET_MS - 1)  # fmt: skip
    reported(settings, keys, "quiet", [row("http://a:80", 20, 2, 0, 0, "start")],
             now - ORIGINS_STALE_MS - 1)  # fmt: skip
    assert origin_limits.read(redis_client, keys, now) == []
    reported(settings, keys, "live", [row("http://c:80", 30, 3, 0, 0, "start")], now)
    assert {w.decode() for w in redis_client.hkeys(keys.catalog.origins)} == {"quiet", "live"}
    assert [r.origin for r in origin_limits.read(redis_client, keys, now)] == ["http://c:80"]
    assert origin_limits.metrics([]) == []


def test_a_worker_that_leaves_takes_its_report(
    redis_client: redis.Redis, keys: Keys, settings: Settings
):
    reported(settings, keys, "w", [row("http://a:80", 10, 1, 0, 0, "start")], 5_000)

    async def leave() -> None:
        client = connect_async(settings, connections=2)
        try:
            await origin_limits.leave(client, keys, "w")
        finally:
            await client.aclose()

    asyncio.run(leave())
    assert not redis_client.exists(keys.catalog.origins)


def test_reports_of_another_release_or_broken_ones_are_read_past(
    redis_client: redis.Redis, keys: Keys, settings: Settings
):
    """During a rolling upgrade a worker of the next release may report a figure this one
    does not know (left aside: the row is shown), or lack one (that row is left out), and
    a field of the hash may be anything: the other workers' rows are still read."""
    now = 10_000_000
    reported(settings, keys, "w1", [row("http://a:80", 100, 90, 5, 4000, "answers in time")], now)
    good = {"origin": "http://b:80", "limit": 64, "ceiling": 4096, "open": 3, "connecting": 0,
            "waiting": 0, "answer_ms": 20.0, "reason": "start", "changed_ms": 10,
            "workers": 1}  # fmt: skip
    newer = {**good, "late_connects": 7}  # a figure of the next release
    lacking = {k: v for k, v in good.items() if k != "answer_ms"} | {"origin": "http://c:80"}
    wrong = {**good, "origin": "http://d:80", "limit": "many"}
    redis_client.hset(keys.catalog.origins, mapping={
        "w2": json.dumps({"at": now, "origins": [newer, lacking, wrong, "x", None]}),
        "w3": "not json", "w4": json.dumps({"at": now}),
        "w5": json.dumps({"at": now, "origins": 5}), "w6": json.dumps([1, 2]),
    })  # fmt: skip
    rows = origin_limits.read(redis_client, keys, now)
    assert [(r.origin, r.limit) for r in rows] == [("http://a:80", 100), ("http://b:80", 64)]
    assert rows[1].answer_ms == 20.0 and rows[1].changed_ms == 10
    assert {m.name for m in origin_limits.metrics(rows)} >= {"origin.connections.limit"}
