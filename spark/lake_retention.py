"""Payload retention in the lake (docs/erasure.md, Retention): an events row goes once
its topic's retention has run out since its `t` (a topic's own `retention_s`, else the
bus's BUSBAR_PAYLOAD_RETENTION_S; 0 keeps), an attempts row once the shortest retention
in force has run out since its `at` (an attempt names no topic, as in Redis). A row goes
whole: an event without its data is nothing a replay could send. The deletes name
topics and times only, so the Delta log they leave holds no payload. Run by the ingest's
keeper (spark/keeper.py) with its vacuum."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import redis
from deltalake import DeltaTable

from app.models.keys import Keys
from spark.delta import is_delta


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def own_retentions(client: redis.Redis, keys: Keys) -> dict[str, int]:
    """Every topic's own retention (s), for those that have one (0 included: kept)."""
    names = sorted(text(t) for t in client.smembers(keys.topics))
    with client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.hget(keys.topic(name), "retention_s")
        values = pipe.execute()
    return {n: int(v) for n, v in zip(names, values, strict=True) if v is not None}


@dataclass(frozen=True)
class Cut:
    """What retention deletes now: per table, the Delta predicates."""

    events: list[str]
    attempts: list[str]


def cuts(own: dict[str, int], default_s: int, now_ms: int) -> Cut:
    """The predicates for `now_ms`: topic names are `^[a-z_]{1,64}$`, safe to quote."""
    events = [f"topic = '{topic}' AND t < {now_ms - s * 1000}"
              for topic, s in sorted(own.items()) if s > 0]  # fmt: skip
    if default_s > 0:
        named = ", ".join(f"'{topic}'" for topic in sorted(own))
        others = f"topic NOT IN ({named}) AND " if own else ""
        events.append(f"{others}t < {now_ms - default_s * 1000}")
    kept = [s for s in (default_s, *own.values()) if s > 0]
    attempts = [f"at < '{instant(now_ms - min(kept) * 1000)}'"] if kept else []
    return Cut(events, attempts)


def instant(ms: int) -> str:
    """An attempt's `at` is a timestamp (UTC), `t` an event's ms: the literal for it."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def apply(output: str, cut: Cut) -> dict[str, int]:
    """Delete what `cut` names from the lake at `output`: rows deleted per table."""
    deleted = {"events": 0, "attempts": 0}
    base = output.rstrip("/")
    for table, predicates in (("events", cut.events), ("attempts", cut.attempts)):
        path = f"{base}/{table}"
        if not predicates or not is_delta(path):
            continue
        for predicate in predicates:
            metrics = DeltaTable(path).delete(predicate)
            deleted[table] += int(metrics.get("num_deleted_rows") or 0)
    return deleted
