"""Per-subscriber samples for GET /metrics (app/services/metrics.py): labelled by client
name, never by token; same-named clients join into one series (Prometheus refuses two
series with the same labels): counts add up, instants take the earliest, ages the oldest.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import redis

from app.clock import now_ms
from app.models.keys import Keys
from app.models.subscriber_detail import oldest_by_lane
from app.redis_client import text
from app.services.counters import Number, number

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # counter | gauge | histogram
    help: str
    samples: dict[Labels, Number] = field(default_factory=dict)


def by_name(
    values: Iterable[tuple[str, Number]], join: Callable[[Number, Number], Number] = operator.add
) -> dict[Labels, Number]:
    """Samples labelled by subscriber name; clients with the same name add up (or are
    joined by `join`: an instant is the earliest, not a sum)."""
    samples: dict[Labels, Number] = {}
    for name, value in values:
        key = (("subscriber", name),)
        samples[key] = join(samples[key], value) if key in samples else value
    return dict(sorted(samples.items()))


def per_subscriber(
    metric: str,
    text: str,
    label: tuple[str, tuple[str, ...]],
    name_of: Callable[[bytes], str],
    tokens: list[bytes],
    counts: list[list[Any]],
) -> list[Metric]:
    """A counter by subscriber name and `label` (its name, and the hash fields' order
    in `counts`); absent fields add no sample, and no sample at all, no metric."""
    samples: dict[Labels, Number] = {}
    for token, values in zip(tokens, counts, strict=True):
        for kind, value in zip(label[1], values, strict=True):
            if value is not None:
                key = (("subscriber", name_of(token)), (label[0], kind))
                samples[key] = samples.get(key, 0) + number(value)
    if not samples:
        return []
    return [Metric(metric, "counter", text, dict(sorted(samples.items())))]


def circuits(
    name_of: Callable[[bytes], str], tokens: list[bytes], states: list[list[Any]]
) -> list[Metric]:
    """Per subscriber: whether its circuit is open (docs/delivery.md), and for an open one
    since when and when it is probed next (epoch ms)."""
    opened = [(name_of(t), s) for t, s in zip(tokens, states, strict=True) if s[0]]
    return [
        Metric(
            "subscriber.circuit.open", "gauge", "subscribers of this name whose circuit is open",
            by_name((name_of(t), 1 if s[0] else 0) for t, s in zip(tokens, states, strict=True)),
        ),
        Metric(
            "subscriber.circuit.opened_at_ms", "gauge", "when an open circuit opened, epoch ms",
            by_name(((n, int(s[0])) for n, s in opened), min),
        ),
        Metric(
            "subscriber.circuit.next_probe_at_ms", "gauge",
            "when an open circuit is next probed, epoch ms",
            by_name(((n, int(s[1] or 0)) for n, s in opened), min),
        ),
    ]  # fmt: skip


def in_flight(
    name_of: Callable[[bytes], str], tokens: list[bytes], flights: list[list[Any]]
) -> Metric:
    """Deliveries in flight per subscriber: its own flight's mark (`inflight`, concurrency
    1) plus its partitions in flight (`flying`, lib/places.lua); while a change of
    concurrency drains, the old layout's and the new one's add up. A flight whose worker
    died counts until the next delivery replaces it, as in the listing's `in_flight`."""
    counts = (
        (name_of(t), (1 if mark else 0) + number(flying))
        for t, (mark, flying) in zip(tokens, flights, strict=True)
    )
    help_ = "deliveries in flight per subscriber (at most its concurrency)"
    return Metric("subscriber.in_flight", "gauge", help_, by_name(counts))


def queue_ages(
    client: redis.Redis, keys: Keys, name_of: Callable[[bytes], str], queued: list[bytes]
) -> Metric:
    """Per subscriber and lane with something queued: how old its oldest batch is (ms,
    by this process's clock); same-named clients show the oldest of theirs."""
    now = now_ms()
    oldest = oldest_by_lane(client, keys, sorted(text(t) for t in queued))
    samples: dict[Labels, Number] = {}
    for token, lanes in oldest.items():
        for lane, created in lanes.items():
            key = (("subscriber", name_of(token.encode())), ("lane", str(lane)))
            samples[key] = max(samples.get(key, 0), max(0, now - created))
    help_ = "age of the oldest queued batch, ms, by subscriber and lane (10: no priority)"
    return Metric("subscriber.queue.oldest_age_ms", "gauge", help_, dict(sorted(samples.items())))
