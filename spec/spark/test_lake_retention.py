"""Payload retention in the lake (spark/lake_retention.py), without a JVM, against a
real Redis: a topic's own retention deletes its events past it and no other's; the bus's
default takes the topics without one, 0 keeps a topic whatever the default; the
attempts go past the shortest retention in force; nothing happens when none is set; the
Delta log names no payload; and the keeper does it at its start."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from app.models.keys import Keys
from spark import delta, lake_retention
from spark.keeper import Keeper
from spark.tables import ATTEMPTS, EVENTS
from spec.spark.test_lake_delta import AT, attempt, event, every_byte, read, rows

DAY_MS = 86_400_000
NOW = int(AT.timestamp() * 1000) + 100 * DAY_MS  # events' t and attempts' at on one clock


def lake(tmp_path: Path) -> Path:
    """orders, people and audit events 1 and 10 days old; attempts 1 and 10 days old."""
    events = [
        {**event(i, f"https://o.test/{topic}/{age}", topic=topic), "t": NOW - age * DAY_MS}
        for i, (topic, age) in enumerate(
            (topic, age) for topic in ("orders", "people", "audit") for age in (1, 10)
        )
    ]
    attempts = [
        {**attempt(i, batch=i), "at": AT + timedelta(days=100 - age), "stream_id": f"{i}-0"}
        for i, age in enumerate((10, 1))
    ]
    base = tmp_path / "lake"
    delta.ensure(base / "events", EVENTS)
    delta.ensure(base / "attempts", ATTEMPTS)
    delta.commit_batch(base / "events", EVENTS, rows(EVENTS, events), "test", 0)
    delta.commit_batch(base / "attempts", ATTEMPTS, rows(ATTEMPTS, attempts), "test", 0)
    return base


def urls(base: Path) -> list[str]:
    return sorted(r["url"] for r in read(base / "events"))


def test_each_topic_keeps_its_payloads_as_long_as_its_retention_says(tmp_path: Path):
    base = lake(tmp_path)
    cut = lake_retention.cuts({"orders": 5 * 86_400, "audit": 0}, 2 * 86_400, NOW)
    deleted = lake_retention.apply(str(base), cut)
    assert deleted == {"events": 2, "attempts": 1}
    # orders: 5 days, its 10-day-old goes; people: the default 2 days, its 10-day-old
    # goes; audit: 0 keeps both
    assert urls(base) == sorted([
        "https://o.test/audit/1", "https://o.test/audit/10",
        "https://o.test/orders/1", "https://o.test/people/1",
    ])  # fmt: skip
    assert [r["stream_id"] for r in read(base / "attempts")] == ["1-0"]  # 2 days: the shortest
    log = b"".join(p.read_bytes() for p in (base / "events" / "_delta_log").iterdir())
    assert b"o.test" not in log  # predicates of topics and times only


def test_the_predicates_for_each_case():
    assert lake_retention.cuts({}, 0, NOW) == lake_retention.Cut([], [])
    only_default = lake_retention.cuts({}, 86_400, NOW)
    assert only_default.events == [f"t < {NOW - DAY_MS}"]
    assert only_default.attempts == [f"at < '{lake_retention.instant(NOW - DAY_MS)}'"]
    mixed = lake_retention.cuts({"orders": 3_600, "audit": 0}, 86_400, NOW)
    assert mixed.events == [
        f"topic = 'orders' AND t < {NOW - 3_600_000}",
        f"topic NOT IN ('audit', 'orders') AND t < {NOW - DAY_MS}",
    ]
    assert mixed.attempts == [f"at < '{lake_retention.instant(NOW - 3_600_000)}'"]  # shortest


def test_the_keeper_applies_the_retention_in_redis_at_its_start(tmp_path: Path, redis_client):
    base = lake(tmp_path)
    keys = Keys()
    for topic in ("orders", "people", "audit"):
        redis_client.sadd(keys.topics, topic)
    redis_client.hset(keys.topic("people"), "retention_s", 5 * 86_400)
    keeper = Keeper(redis_client, keys, str(base), erase_now=True)
    keeper.tick(force=True)
    # no default: only people has a retention, and (by today's clock) both its events
    # are long past it; the others stay
    assert urls(base) == sorted(f"https://o.test/{topic}/{age}"
                                for topic in ("orders", "audit") for age in (1, 10))  # fmt: skip
    assert b"o.test/people/" not in every_byte(base)  # vacuumed at once (erase_now)
    assert read(base / "attempts") == []  # past the shortest retention in force (5 days)
