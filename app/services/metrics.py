"""Counters and gauges with Routemaster's names, for GET /metrics and the Monitor job.

Counters live in the `counters` hash, written by the Lua scripts as things happen;
gauges are read from the queue's own bookkeeping at collection time. Subscribers are
labelled by client name, never by token (a token is a credential).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import redis

from app.models.keys import Keys
from app.models.queue import AUX, MAIN
from config.settings import Settings

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


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # counter | gauge
    help: str
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)


def collect(client: redis.Redis, keys: Keys, settings: Settings) -> list[Metric]:
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
    counters, events, batches, tokens, workers, *jobs, memory = pipe.execute()

    def name_of(token: bytes) -> str:
        return (tokens.get(token) or token).decode()

    metrics = [
        Metric(name, "counter", text, [({}, float(counters.get(name.encode(), 0)))])
        for name, text in COUNTERS.items()
    ]
    for kind, gauge in (("events", events), ("batches", batches)):
        samples = [({"subscriber": name_of(t)}, float(v)) for t, v in sorted(gauge.items())]
        metrics.append(
            Metric(f"subscriber.queue.{kind}", "gauge", f"{kind} queued per subscriber", samples)
        )
    job_samples = []
    for i, queue in enumerate((MAIN, AUX)):
        scheduled, instant, total = jobs[i * 3 : i * 3 + 3]
        job_samples += [
            ({"queue": queue, "status": "scheduled"}, float(scheduled)),
            ({"queue": queue, "status": "instant"}, float(instant)),
            ({"queue": queue, "status": "pending"}, float(max(0, total - scheduled - instant))),
        ]
    metrics.append(Metric("jobs.count", "gauge", "jobs by queue and state", job_samples))
    metrics.append(
        Metric("workers", "gauge", "worker processes with a heartbeat", [({}, float(workers))])
    )
    used = float(memory["used_memory"])
    metrics.append(Metric("redis.used_memory", "gauge", "bytes Redis uses", [({}, used)]))
    metrics.append(
        Metric(
            "redis.max_mem", "gauge", "BUSBAR_REDIS_MAX_MEM", [({}, float(settings.redis_max_mem))]
        )
    )
    metrics.append(
        Metric(
            "redis.min_free",
            "gauge",
            "BUSBAR_REDIS_MIN_FREE",
            [({}, float(settings.redis_min_free))],
        )
    )
    return metrics


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def prometheus(metrics: list[Metric]) -> str:
    """The text exposition format: `busbar_` prefix, dots as underscores, `_total` counters."""
    lines = []
    for m in metrics:
        name = "busbar_" + m.name.replace(".", "_") + ("_total" if m.kind == "counter" else "")
        lines += [f"# HELP {name} {m.help}", f"# TYPE {name} {m.kind}"]
        for labels, value in m.samples:
            rendered = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            lines.append(f"{name}{{{rendered}}} {value:g}" if rendered else f"{name} {value:g}")
    return "\n".join(lines) + "\n"


def one_line(metrics: list[Metric]) -> str:
    """For the `print` sink: every sample on one log line, `name{labels}=value`."""
    parts = []
    for m in metrics:
        for labels, value in m.samples:
            suffix = ",".join(f"{k}={v}" for k, v in labels.items())
            parts.append(f"{m.name}{'{' + suffix + '}' if suffix else ''}={value:g}")
    return " ".join(parts)
