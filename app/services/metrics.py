"""Counters, gauges and the delivery-latency histogram with Routemaster's names, for
GET /metrics (app/web/metrics.py renders them with prometheus_client) and the Monitor
job's log line.

Counters live in the catalog's and each shard's `counters` hash, written by the Lua
scripts as things happen, and are added up here; gauges are read from the queues' own
bookkeeping at collection time. Values stay the
integers Redis holds: nothing is rounded on the way out.

Subscribers are labelled by client name, never by token (a token is a credential).
Names are free text and two clients may share one; their values are then added into one
series, because two series with the same labels are an error to Prometheus.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import redis

from app.clock import now_ms
from app.models.attempt_result import OUTCOMES
from app.models.keys import AUX, MAIN, Keys
from app.models.subscriber_detail import DROPPED
from app.redis_client import raw, text
from app.services import origin_limits
from app.services.counters import Number, merged, number, totals
from app.services.shedding import domains, used_bytes
from app.services.subscriber_metrics import (
    Labels,
    Metric,
    by_name,
    circuits,
    in_flight,
    per_subscriber,
    queue_ages,
)
from app.turn import Turn, no_turn
from config.settings import Settings

COUNTERS = {
    "events.published": "events accepted by publish",
    "events.added": "events queued, one per subscriber",
    "events.removed": "queued events dropped when their subscriber was deleted",
    "events.expired": "queued events dropped unsent after their ttl",
    "events.autodropped": "queued events dropped by Autodrop under memory pressure",
    "events.deadlettered": "events moved to dead letters after max_attempts",
    "events.coalesced": "events that replaced a queued event with the same url",
    "events.filtered": "events a subscriber's content filters kept from it (never queued)",
    "events.transformed_out": "events a route's transform gave nothing for (null or "
    "undefined): acknowledged, never sent (docs/transforms.md)",
    "events.transform_failed": "events whose transform failed (a bound hit, or an "
    "expression error), dead-lettered alone",
    "events.replayed": "dead letters requeued by a replay",
    "events.lake_replayed": "events queued again from the lake by `busbar spark replay`",
    "events.erased": "queued events removed by an erasure (docs/erasure.md)",
    "deadletters.trimmed": "dead letters dropped because the list was full",
    "deadletters.retired": "dead letters removed past their topic's payload retention",
    "delivery.batches": "batches acknowledged by subscribers",
    "delivery.events": "events acknowledged by subscribers",
    "delivery.failures": "delivery attempts that failed",
    "delivery.deferred": "delivery attempts answered 429/503 with Retry-After: waited, not failed",
    "delivery.held_back": "attempts not sent: the failing share was full, the callback's "
    "origin had no connection free in time (BUSBAR_ORIGIN_CONNECTIONS), or the transforms' "
    "slow lane had spent its share of a core (BUSBAR_TRANSFORM_SLOW_MS)",
    "delivery.set_aside": "failing batches whose keys stepped aside so their partition "
    "goes on (concurrency above 1: docs/internals.md, Keys set aside)",
    "circuit.opened": "subscriber circuits opened by failures in a row",
    "circuit.probes": "failed attempts while a circuit was open (not counted as attempts)",
    "circuit.closed": "subscriber circuits closed by a successful probe",
    "delivery.time_ms": "time spent in acknowledged HTTP deliveries, ms",
    "latency.batches_ms": "sum over acknowledged batches of creation-to-acknowledgement time, ms",
}
LINE_SUBSCRIBERS = 20  # subscribers the Monitor's log line names, the most queued first
# Written by the acknowledgement: per batch, 1 in `latency.le.<n>`, n the smallest power
# of two (ms) at least its creation-to-acknowledgement time, or in `latency.le.inf`.
LATENCY_BOUNDS = tuple(2**i for i in range(21))  # 1 ms .. 1048576 ms (17.5 min)
LATENCY_FIELD = "latency.le."


@dataclass(frozen=True)
class Histogram:
    """Cumulative buckets (upper bound in ms, count at or below it; inf last) and sum."""

    name: str
    help: str
    buckets: list[tuple[float, int]]
    total: Number


def latency_histogram(counters: dict[bytes, bytes]) -> Histogram | None:
    """None until the first acknowledged batch has written a bucket."""
    fields = {k.decode()[len(LATENCY_FIELD) :]: number(v) for k, v in counters.items()
              if k.startswith(LATENCY_FIELD.encode())}  # fmt: skip
    if not fields:
        return None
    buckets: list[tuple[float, int]] = []
    running: float = 0
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


# what collect reads of each subscriber's hash, each read back by its field's name
ATTEMPTS = tuple(f"attempts.{o}" for o in OUTCOMES)
STATE_FIELDS = (
    "failures", "circuit_at", "next_attempt_at", "paused_at", *DROPPED, *ATTEMPTS,
    "inflight", "flying", "filtered",
)  # fmt: skip
STATES_AT_ONCE = 500  # subscribers' states a pipeline reads (subscriber_states)


@dataclass(frozen=True)
class Snapshot:
    metrics: list[Metric]
    latency: Histogram | None


def collect(
    client: redis.Redis,
    keys: Keys,
    settings: Settings,
    most: int | None = None,
    turn: Turn = no_turn,
) -> Snapshot:
    """`most`: the series of only that many subscribers, those with the most events
    queued, and `subscribers.omitted` counting the rest (the Monitor's log line);
    None: every subscriber's (GET /metrics). `turn`: called between pieces of the work,
    where a web process lets its other requests in (app/web/turns.py): the subscribers'
    states are read STATES_AT_ONCE at a time for it."""
    # redis-py types a reply bytes | str; busbar's clients decode none (decode_responses)
    tokens = cast(list[bytes], sorted(client.hkeys(keys.subscribers)))
    turn()
    counters = totals(client, keys)
    events = merged(client, keys, "event_gauge")
    turn()
    batches = merged(client, keys, "batch_gauge")
    turn()
    every = len(tokens)
    if most is not None:
        tokens = busiest(tokens, events, most)
        events, batches = only(events, tokens), only(batches, tokens)
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(keys.tokens)
    pipe.hlen(keys.catalog.workers)
    for queue, places in ((MAIN, keys.all_shards()), (AUX, [keys.catalog])):
        for place in places:
            pipe.zcard(place.jobs_scheduled(queue))
            pipe.llen(place.jobs_instant(queue))
            pipe.scard(place.jobs_index(queue))
    names, workers, *job_counts = pipe.execute()
    turn()
    states = subscriber_states(client, keys, tokens, turn)
    failures = [s["failures"] for s in states]
    used = max(used_bytes(client, domain, 0.0) for domain in domains(client, keys))

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
        turn()
    if any(f is not None for f in failures):
        samples = by_name(
            (name_of(raw(t)), number(f)) for t, f in zip(tokens, failures, strict=True)
        )
        metrics.append(
            Metric("subscriber.failures", "counter", "failed delivery attempts", samples)
        )
    turn()
    metrics += circuits(name_of, tokens, [[s["circuit_at"], s["next_attempt_at"]] for s in states])
    turn()
    # every event the bus dropped unsent, by reason (listed only for subscribers with a
    # drop, so a healthy bus adds nothing), and every delivery attempt, by outcome
    paused = by_name(
        (name_of(t), 1 if s["paused_at"] else 0) for t, s in zip(tokens, states, strict=True)
    )
    metrics.append(Metric("subscriber.paused", "gauge", "subscribers of this name paused", paused))
    turn()
    metrics += per_subscriber(
        "subscriber.events.dropped", "events dropped unsent, by subscriber and reason",
        ("reason", DROPPED), name_of, tokens, [[s[d] for d in DROPPED] for s in states],
    )  # fmt: skip
    turn()
    metrics += per_subscriber(
        "subscriber.attempts", "delivery attempts, by subscriber and outcome",
        ("outcome", OUTCOMES), name_of, tokens, [[s[a] for a in ATTEMPTS] for s in states],
    )  # fmt: skip
    turn()
    filtered = [(name_of(t), number(s["filtered"])) for t, s in zip(tokens, states, strict=True)
                if s["filtered"] is not None]  # fmt: skip
    if filtered:  # a bus without filters adds nothing
        text_ = "events a subscriber's content filters kept from it, by subscriber"
        metrics.append(Metric("subscriber.events.filtered", "counter", text_, by_name(filtered)))
    metrics.append(in_flight(name_of, tokens, [[s["inflight"], s["flying"]] for s in states]))
    turn()
    metrics.append(queue_ages(client, keys, name_of, [t for t, v in events.items() if number(v)]))
    job_samples: dict[Labels, Number] = {}
    counted = iter(job_counts)  # three a queue, in the order the pipeline asked them
    for queue in [MAIN] * keys.shards + [AUX]:
        scheduled, instant, total = next(counted), next(counted), next(counted)
        pending = max(0, total - scheduled - instant)
        for status, value in (("scheduled", scheduled), ("instant", instant), ("pending", pending)):
            label = (("queue", queue), ("status", status))
            job_samples[label] = job_samples.get(label, 0) + value
    metrics += [
        Metric("jobs.count", "gauge", "jobs by queue and state", job_samples),
        Metric("workers", "gauge", "worker processes with a heartbeat", {(): workers}),
        Metric("redis.used_memory", "gauge", "bytes Redis uses (the fullest node)", {(): used}),
        Metric("redis.max_mem", "gauge", "BUSBAR_REDIS_MAX_MEM", {(): settings.redis_max_mem}),
        Metric("redis.min_free", "gauge", "BUSBAR_REDIS_MIN_FREE", {(): settings.redis_min_free}),
        *origin_limits.metrics(origin_limits.read(client, keys, now_ms())),
    ]
    if most is not None:
        text_ = "subscribers whose series this leaves out (GET /metrics has every one)"
        metrics.append(Metric("subscribers.omitted", "gauge", text_, {(): every - len(tokens)}))
    return Snapshot(metrics, latency_histogram(counters))


def subscriber_states(
    client: redis.Redis, keys: Keys, tokens: list[bytes], turn: Turn
) -> list[dict[str, bytes | None]]:
    """Each subscriber's STATE_FIELDS, in `tokens`' order: a pipelined read of
    STATES_AT_ONCE at a time, a turn after each."""
    states: list[dict[str, bytes | None]] = []
    for start in range(0, len(tokens), STATES_AT_ONCE):
        pipe = client.pipeline(transaction=False)
        for token in tokens[start : start + STATES_AT_ONCE]:
            pipe.hmget(keys.subscriber(text(token)), *STATE_FIELDS)
        states += [dict(zip(STATE_FIELDS, row, strict=True)) for row in pipe.execute()]
        turn()
    return states


def busiest(tokens: list[bytes], events: dict[bytes, bytes], most: int) -> list[bytes]:
    """Of `tokens`, the `most` with the most events queued, none with nothing queued."""
    queued = [(-number(events.get(t)), t) for t in tokens if number(events.get(t)) > 0]
    return sorted(t for _, t in sorted(queued)[:most])


def only(gauge: dict[bytes, bytes], tokens: list[bytes]) -> dict[bytes, bytes]:
    kept = set(tokens)
    return {t: v for t, v in gauge.items() if t in kept}


def one_line(snapshot: Snapshot) -> str:
    """For the `print` sink: every sample on one log line, `name{labels}=value`. Made
    of collect(most=LINE_SUBSCRIBERS): with every subscriber's series, the line of a bus
    of 10,000 idle subscribers was 1.2 MB every BUSBAR_MONITOR_INTERVAL (10 GB of log a
    day), and 0.18 s of a worker's CPU to make."""
    parts = []
    for m in snapshot.metrics:
        for labels, value in m.samples.items():
            suffix = ",".join(f"{k}={v}" for k, v in labels)
            parts.append(f"{m.name}{'{' + suffix + '}' if suffix else ''}={value}")
    return " ".join(parts)  # the latency histogram is for Prometheus; its sum is a counter
