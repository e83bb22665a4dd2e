"""Per-minute samples on a real Redis: one per minute whoever writes, bounded, and the
figures /history makes of them (deltas, percentiles from the latency histogram)."""

from __future__ import annotations

import json

import pytest
import redis

from app.models.keys import Keys
from app.services import samples
from app.services.samples import MINUTE_MS, history, percentile, record


def now_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def seed(client: redis.Redis, keys: Keys, at: int, counters: dict[str, int]) -> None:
    """A sample as an earlier Monitor run would have written it."""
    minute = at - at % MINUTE_MS
    client.hset(keys.samples, str(minute), json.dumps({"t": at, "c": counters}))


def test_one_sample_per_minute_whoever_writes_it(redis_client: redis.Redis, keys: Keys):
    redis_client.hset(keys.shard(1).counters, mapping={"events.published": 7, "events.added": 9})
    assert record(redis_client, keys) is True
    redis_client.hincrby(keys.shard(1).counters, "events.published", 1)
    assert record(redis_client, keys) in (False, True)  # True only across a minute boundary
    stored = [json.loads(v) for v in redis_client.hvals(keys.samples)]
    assert stored[0]["c"] == {"events.published": 7}  # only what the charts need
    assert abs(stored[0]["t"] - now_ms(redis_client)) < 5_000


def test_samples_older_than_65_minutes_are_dropped(redis_client: redis.Redis, keys: Keys):
    now = now_ms(redis_client)
    for minutes in (90, 66, 64, 2):
        seed(redis_client, keys, now - minutes * MINUTE_MS, {})
    record(redis_client, keys)
    kept = sorted((now - int(m)) // MINUTE_MS for m in redis_client.hkeys(keys.samples))
    assert kept[-2:] == [2, 64]
    assert max(kept) < 65


def test_history_counts_what_happened_between_samples(redis_client: redis.Redis, keys: Keys):
    now = now_ms(redis_client)
    before = {"events.published": 10, "delivery.events": 8, "delivery.batches": 2}
    after = {
        "events.published": 40, "delivery.events": 38, "delivery.failures": 3,
        "delivery.batches": 12, "latency.batches_ms": 250,
        **{f"latency.le.{n}": c for n, c in ((4, 5), (16, 4), (64, 1))},
    }  # fmt: skip
    seed(redis_client, keys, now - 2 * MINUTE_MS, before)
    seed(redis_client, keys, now - MINUTE_MS, after)
    redis_client.hset(keys.shard(1).counters, mapping={**after, "events.published": 41})
    at, points, total = history(redis_client, keys)
    assert abs(at - now) < 5_000
    first, live = points
    assert first["end"] - first["start"] == MINUTE_MS
    assert (first["published"], first["delivered"], first["failed"]) == (30, 30, 3)
    assert first["batches"] == 10
    assert first["latency_mean_ms"] == 25
    assert (first["latency_p50_ms"], first["latency_p99_ms"]) == (4, 64)
    assert first["partial"] is False
    assert live["partial"] is True
    assert live["published"] == 1 and live["latency_p50_ms"] is None
    assert total["published"] == 31


def test_gaps_and_resets_make_no_point(redis_client: redis.Redis, keys: Keys):
    now = now_ms(redis_client)
    seed(redis_client, keys, now - 20 * MINUTE_MS, {"events.published": 5})
    seed(redis_client, keys, now - 3 * MINUTE_MS, {"events.published": 100})  # 17 min later
    seed(redis_client, keys, now - 2 * MINUTE_MS, {"events.published": 4})  # counters reset
    redis_client.hset(keys.shard(1).counters, "events.published", 6)
    _, points, _ = history(redis_client, keys)
    assert [p["published"] for p in points] == [2]


def test_no_sample_yet_no_point_and_no_total(redis_client: redis.Redis, keys: Keys):
    assert history(redis_client, keys)[1:] == ([], None)


@pytest.mark.parametrize(
    ("buckets", "q", "expected"),
    [
        ([0] * 22, 0.5, None),
        ([1] + [0] * 21, 0.99, 1),
        ([0, 0, 50, 49, 1] + [0] * 17, 0.5, 4),
        ([0, 0, 50, 49, 1] + [0] * 17, 0.99, 8),
        ([0, 0, 50, 49, 1] + [0] * 17, 1.0, 16),
        ([0] * 21 + [3], 0.5, 1048576),  # beyond the last bound: reported as that bound
    ],
)
def test_percentile_is_the_upper_bound_of_its_bucket(buckets, q, expected):
    assert percentile(buckets, q) == expected


def test_the_sampled_histogram_fields_are_the_documented_ones():
    assert samples.LATENCY_FIELDS[0] == "latency.le.1"
    assert samples.LATENCY_FIELDS[-2:] == ["latency.le.1048576", "latency.le.inf"]
