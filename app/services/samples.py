"""Per-minute samples of the bus's counters: what the console charts over the last hour.

The `counters` hash only grows, so a chart needs copies of it taken over time. The
Monitor job copies the fields below once a minute (the first run of each minute wins,
so any number of workers write one sample); GET /history turns consecutive copies into
per-minute figures, plus one from the latest copy to the counters as they are now.
Times are Redis TIME, so workers with skewed clocks agree.

Latency percentiles come from the histogram the ack script keeps in `counters`
(`latency.le.<n>`, one field per power of two, not cumulative): the difference between
two samples is the histogram of the batches acknowledged in between, and a percentile
is the upper bound of the bucket it falls in (so at most 2x above the true value).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import asdict, dataclass
from typing import Any

import redis

from app.models.keys import Keys
from app.redis_client import server_time_ms
from app.services.counters import totals

MINUTE_MS = 60_000
KEEP_MS = 65 * MINUTE_MS  # an hour of points needs 61 samples; a little slack
WINDOW_MS = 60 * MINUTE_MS
MAX_GAP_MS = 5 * MINUTE_MS  # samples further apart than this (no worker ran) make no point
LATENCY_BOUNDS: list[int] = [2**i for i in range(21)]  # 1 ms .. 1048576 ms (17.5 minutes)
LATENCY_FIELDS = [f"latency.le.{n}" for n in LATENCY_BOUNDS] + ["latency.le.inf"]
FIGURES = {
    "published": "events.published",
    "delivered": "delivery.events",
    "failed": "delivery.failures",
    "batches": "delivery.batches",
}
SAMPLED = [*FIGURES.values(), "latency.batches_ms", *LATENCY_FIELDS]


@dataclass(frozen=True)
class Point:
    """What happened between two samples, about a minute apart."""

    start: int
    end: int
    published: int
    delivered: int
    failed: int
    batches: int
    latency_mean_ms: int | None
    latency_p50_ms: int | None
    latency_p99_ms: int | None
    partial: bool = False  # from the last sample to now: the minute under way


def sampled(client: redis.Redis, keys: Keys) -> dict[str, int]:
    """The sampled counters, summed over the catalog and every shard."""
    summed = totals(client, keys)
    return {name: int(summed[name.encode()]) for name in SAMPLED if name.encode() in summed}


def record(client: redis.Redis, keys: Keys) -> bool:
    """Copy the sampled counters for this minute unless a sample exists; True if written."""
    now = server_time_ms(client, keys.samples)
    counters = sampled(client, keys)
    sample = json.dumps({"t": now, "c": counters}, separators=(",", ":"))
    if not client.hsetnx(keys.samples, str(now - now % MINUTE_MS), sample):
        return False
    old = [m for m in client.hkeys(keys.samples) if int(m) < now - KEEP_MS]
    if old:
        client.hdel(keys.samples, *old)
    return True


def percentile(buckets: list[int], q: float) -> int | None:
    """Upper bound of the bucket holding the q-quantile; beyond the last bound counts as
    the last bound (1048576 ms: "17.5 minutes or more")."""
    total = sum(buckets)
    if total <= 0:
        return None
    rank = math.ceil(q * total)
    seen = 0
    for bound, count in zip([*LATENCY_BOUNDS, LATENCY_BOUNDS[-1]], buckets, strict=True):
        seen += count
        if seen >= rank:
            return bound
    return LATENCY_BOUNDS[-1]


def point(before: dict[str, Any], after: dict[str, Any], partial: bool = False) -> Point | None:
    """None when the counters went backwards (the hash was reset): no honest figure."""
    a, b = before["c"], after["c"]
    delta = {name: b.get(name, 0) - a.get(name, 0) for name in SAMPLED}
    if any(v < 0 for v in delta.values()):
        return None
    batches = delta["delivery.batches"]
    buckets = [delta[name] for name in LATENCY_FIELDS]
    return Point(
        start=before["t"],
        end=after["t"],
        **{figure: delta[name] for figure, name in FIGURES.items()},
        latency_mean_ms=round(delta["latency.batches_ms"] / batches) if batches else None,
        latency_p50_ms=percentile(buckets, 0.5),
        latency_p99_ms=percentile(buckets, 0.99),
        partial=partial,
    )


def history(
    client: redis.Redis, keys: Keys
) -> tuple[int, list[dict[str, Any]], dict[str, Any] | None]:
    """(Redis time now, the points of the last hour oldest first, the hour's total).

    The last point runs from the latest sample to the counters as they are now, so the
    chart shows the minute under way instead of lagging a minute behind.
    """
    now = server_time_ms(client, keys.samples)
    raw = client.hvals(keys.samples)
    current = sampled(client, keys)
    taken = sorted((json.loads(r) for r in raw), key=lambda s: s["t"])
    samples = [s for s in taken if s["t"] >= now - WINDOW_MS - MAX_GAP_MS]
    samples.append({"t": now, "c": current, "live": True})
    points = []
    for before, after in itertools.pairwise(samples):
        if after["t"] - before["t"] > MAX_GAP_MS or after["t"] < now - WINDOW_MS:
            continue
        found = point(before, after, partial="live" in after)
        if found is not None:
            points.append(asdict(found))
    first = next((s for s in samples if s["t"] >= now - WINDOW_MS), None)
    total = point(first, samples[-1], partial=True) if first and first is not samples[-1] else None
    return now, points, None if total is None else asdict(total)
