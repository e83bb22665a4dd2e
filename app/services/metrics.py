"""Counters, gauges and the delivery-latency histogram with Routemaster's names, for
GET /metrics (app/web/metrics.py renders them with prometheus_client) and the Monitor
job's log line.

Counters live in the `counters` hash, written by the Lua scripts as things happen;
gauges are read from the queue's own bookkeeping at collection time. Values stay the
integers Redis holds: nothing is rounded on the way out.

Subscribers are labelled by client name, never by token (a token is a credential).
Names are free text and two clients may share one; their values are then added into one
series, because two series with the same labels are an error to Prometheus.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import redis

from app.models.keys import Keys
from app.models.queue import AUX, MAIN
from config.settings import Settings

Number = int | float
Labels = tuple[tuple[str, str], ...]

COUNTERS = {
    "events.published": "events accepted by publish",
    "events.added": "events queued, one per subscriber",
    "events.removed": "queued events dropped when their subscriber was deleted",
    "events.expired": "queued events dropped unsent after their ttl",
    "events.autodropped": "queued events dropped by Autodrop under memory pressure",
    "events.deadlettered": "events moved to dead letters after max_attempts",
    "events.coalesced": "events that replaced a queued event with the same url",
    "events.replayed": "dead letters requeued by a replay",
    "deadletters.trimmed": "dead letters dropped because the list was full",
    "delivery.batches": "batches acknowledged by subscribers",
    "delivery.events": "events acknowledged by subscribers",
    "delivery.failures": "delivery attempts that failed",
    "delivery.time_ms": "time spent in acknowledged HTTP deliveries, ms",
    "latency.batches_ms": "sum over acknowledged batches of creation-to-acknowledgement time, ms",
}
# Written by the acknowledgement: per batch, 1 in `latency.le.<n>`, n the smallest power
# of two (ms) at least its creation-to-acknowledgement time, or in `latency.le.inf`.
LATENCY_BOUNDS = tuple(2**i for i in range(21))  # 1 ms .. 1048576 ms (17.5 min)
LATENCY_FIELD = "latency.le."


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # counter | gauge | histogram
    help: str
    samples: dict[Labels, Number] = field(default_factory=dict)


@dataclass(frozen=True)
class Histogram:
    """Cumulative buckets (upper bound in ms, count at or below it; inf last) and sum."""

    name: str
    help: str
    buckets: list[tuple[float, int]]
    total: Number


def number(raw: bytes | str | int | None) -> Number:
    """A Redis value as the exact number it is (HINCRBY: int; HINCRBYFLOAT: float)."""
    if raw is None:
        return 0
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    try:
        return int(text)
    except ValueError:
        return float(text)


def by_name(values: Iterable[tuple[str, Number]]) -> dict[Labels, Number]:
    """Samples labelled by subscriber name; clients with the same name add up."""
    samples: dict[Labels, Number] = {}
    for name, value in values:
        key = (("subscriber", name),)
        samples[key] = samples.get(key, 0) + value
    return dict(sorted(samples.items()))


def latency_histogram(counters: dict[bytes, bytes]) -> Histogram | None:
    """None until the first acknowledged batch has written a bucket."""
    fields = {k.decode()[len(LATENCY_FIELD) :]: number(v) for k, v in counters.items()
              if k.startswith(LATENCY_FIELD.encode())}  # fmt: skip
    if not fields:
        return None
    buckets, running = [], 0
    for bound in LATENCY_BOUNDS:
        running += fields.get(str(bound), 0)
        buckets.append((float(bound), int(running)))
    buckets.append((float("inf"), int(running + fields.get("inf", 0))))
    return Histogram(
        "delivery.latency_ms",
        "batches by creation-to-acknowledgement time, ms",
        buckets,
        number(counters.get(b"latency.batches_ms")),
    )


@dataclass(frozen=True)
class Snapshot:
    metrics: list[Metric]
    latency: Histogram | None


def collect(client: redis.Redis, keys: Keys, settings: Settings) -> Snapshot:
    tokens = sorted(client.smembers(keys.subscribers))
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(keys.counters)
    pipe.hgetall(keys.event_gauge)
    pipe.hgetall(keys.batch_gauge)
    pipe.hgetall(keys.tokens)
    pipe.hlen(keys.workers)
    for queue in (MAIN, AUX):
        pipe.zcard(keys.jobs_scheduled(queue))
        pipe.llen(keys.jobs_instant(queue))
        pipe.scard(keys.jobs_index(queue))
    pipe.info("memory")
    for token in tokens:
        pipe.hget(keys.subscriber(token.decode()), "failures")
    counters, events, batches, names, workers, *rest = pipe.execute()
    jobs, memory, failures = rest[:6], rest[6], rest[7:]

    def name_of(token: bytes) -> str:
        return (names.get(token) or b"").decode() or "(deleted client)"

    metrics = [
        Metric(name, "counter", text, {(): number(counters.get(name.encode()))})
        for name, text in COUNTERS.items()
    ]
    for kind, gauge in (("events", events), ("batches", batches)):
        samples = by_name((name_of(t), number(v)) for t, v in gauge.items())
        metrics.append(
            Metric(f"subscriber.queue.{kind}", "gauge", f"{kind} queued per subscriber", samples)
        )
    if any(f is not None for f in failures):
        samples = by_name((name_of(t), number(f)) for t, f in zip(tokens, failures, strict=True))
        metrics.append(
            Metric("subscriber.failures", "counter", "failed delivery attempts", samples)
        )
    job_samples: dict[Labels, Number] = {}
    for i, queue in enumerate((MAIN, AUX)):
        scheduled, instant, total = jobs[i * 3 : i * 3 + 3]
        pending = max(0, total - scheduled - instant)
        for status, value in (("scheduled", scheduled), ("instant", instant), ("pending", pending)):
            job_samples[(("queue", queue), ("status", status))] = value
    metrics += [
        Metric("jobs.count", "gauge", "jobs by queue and state", job_samples),
        Metric("workers", "gauge", "worker processes with a heartbeat", {(): workers}),
        Metric("redis.used_memory", "gauge", "bytes Redis uses", {(): memory["used_memory"]}),
        Metric("redis.max_mem", "gauge", "BUSBAR_REDIS_MAX_MEM", {(): settings.redis_max_mem}),
        Metric("redis.min_free", "gauge", "BUSBAR_REDIS_MIN_FREE", {(): settings.redis_min_free}),
    ]
    return Snapshot(metrics, latency_histogram(counters))


def one_line(snapshot: Snapshot) -> str:
    """For the `print` sink: every sample on one log line, `name{labels}=value`."""
    parts = []
    for m in snapshot.metrics:
        for labels, value in m.samples.items():
            suffix = ",".join(f"{k}={v}" for k, v in labels)
            parts.append(f"{m.name}{'{' + suffix + '}' if suffix else ''}={value}")
    return " ".join(parts)  # the latency histogram is for Prometheus; its sum is a counter
