"""The connection limits each worker learnt per callback origin, where an operator sees
them: GET /metrics (per origin, summed over the workers) and GET /origins (the
console's table of origins: also why each limit last changed, and when).

A limit lives in the worker process that learnt it (app/delivery/origin_limit.py), so
each worker's engine reports its busiest origins every ORIGINS_REPORT_S into one field
of the catalog's `origins` hash (app/models/keys.py), and readers add the fields up.
One field a worker, overwritten: the hash holds as many as there are workers, a report
older than ORIGINS_STALE_MS (a worker killed) is not shown, and each report deletes the
fields older than ORIGINS_FORGET_MS. An origin is scheme, host and port only: never a
path or a query, which may carry a subscriber's secrets.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import redis
import redis.asyncio

from app.models.keys import Keys
from app.services.subscriber_metrics import Labels, Metric

ORIGINS_REPORT_S = 5.0
ORIGINS_REPORTED = 100  # origins a worker reports, the busiest first
ORIGINS_STALE_MS = 20_000
ORIGINS_FORGET_MS = 3_600_000


@dataclass(frozen=True)
class OriginRow:
    """One origin as one worker, or (read()) every worker, has it."""

    origin: str  # scheme://host:port
    limit: int
    ceiling: int
    open: int
    connecting: int
    waiting: int
    answer_ms: float  # an answer's time lately, averaged
    reason: str  # why the limit last changed
    changed_ms: int  # how long ago, ms
    workers: int = 1


async def report(
    client: redis.asyncio.Redis | redis.asyncio.RedisCluster,
    keys: Keys,
    worker: str,
    rows: list[OriginRow],
    now_ms: int,
) -> None:
    """This worker's rows, replacing its last report; reports forgotten long ago go."""
    key = keys.catalog.origins
    payload = {"at": now_ms, "origins": [asdict(r) for r in rows[:ORIGINS_REPORTED]]}
    await client.hset(key, worker, json.dumps(payload, separators=(",", ":")))
    old = [w for w, raw in (await client.hgetall(key)).items()
           if _at(raw) < now_ms - ORIGINS_FORGET_MS]  # fmt: skip
    if old:
        await client.hdel(key, *old)


async def leave(
    client: redis.asyncio.Redis | redis.asyncio.RedisCluster, keys: Keys, worker: str
) -> None:
    await client.hdel(keys.catalog.origins, worker)


def read(client: redis.Redis, keys: Keys, now_ms: int) -> list[OriginRow]:
    """Every origin a live worker reported, its figures summed over the workers (the
    limit too: what the origin is asked to take from the whole bus), the most recent
    reason; the busiest first."""
    merged: dict[str, OriginRow] = {}
    for raw in client.hvals(keys.catalog.origins):
        at, found_rows = _report(raw)
        if at < now_ms - ORIGINS_STALE_MS:
            continue
        for found in found_rows:
            row = _row(found, now_ms - at)
            if row is None:
                continue
            merged[row.origin] = _sum(merged[row.origin], row) if row.origin in merged else row
    return sorted(merged.values(), key=lambda r: (-(r.open + r.waiting), r.origin))


_FIELDS = [f.name for f in fields(OriginRow)]


def _report(raw: bytes | str) -> tuple[int, list[Any]]:
    """A report's time and rows; (0, []) for a field that is not one (too old to show)."""
    try:
        parsed = json.loads(raw)
        at, found = int(parsed["at"]), parsed.get("origins")
    except (ValueError, KeyError, TypeError, AttributeError):
        return 0, []
    return at, found if isinstance(found, list) else []


def _row(found: Any, age_ms: int) -> OriginRow | None:
    """One worker's row, aged by its report's age; None when it lacks a figure this
    release shows or holds one of another kind. A worker of another release may write
    the hash during a rolling upgrade (docs/operating.md): fields this release does not
    know are left aside, so GET /metrics and GET /origins answer through the upgrade
    (a field added by the next release made both 500 on the release before)."""
    if not isinstance(found, dict):
        return None
    known = {name: found[name] for name in _FIELDS if name in found}
    try:
        row = OriginRow(**known)
    except TypeError:  # a figure missing
        return None
    numbers = (row.limit, row.ceiling, row.open, row.connecting, row.waiting,
               row.answer_ms, row.changed_ms, row.workers)  # fmt: skip
    if not (isinstance(row.origin, str) and isinstance(row.reason, str)) or not all(
        isinstance(n, int | float) and not isinstance(n, bool) for n in numbers
    ):
        return None
    return replace(row, changed_ms=int(row.changed_ms) + age_ms)


def metrics(rows: list[OriginRow]) -> list[Metric]:
    """Gauges by origin; none while no worker reports one."""
    if not rows:
        return []

    def by_origin(field: str) -> dict[Labels, int | float]:
        return {(("origin", r.origin),): getattr(r, field) for r in rows}

    return [
        Metric("origin.connections.limit", "gauge",
               "connections the workers may open to a callback origin now (adaptive)",
               by_origin("limit")),
        Metric("origin.connections.open", "gauge",
               "connections open to a callback origin, in use or kept alive", by_origin("open")),
        Metric("origin.deliveries.waiting", "gauge",
               "deliveries waiting for a connection to a callback origin", by_origin("waiting")),
    ]  # fmt: skip


def described(rows: list[OriginRow]) -> list[dict[str, Any]]:
    """GET /origins' list."""
    return [asdict(r) for r in rows]


def _sum(a: OriginRow, b: OriginRow) -> OriginRow:
    latest = a if a.changed_ms <= b.changed_ms else b
    weight = a.open + b.open or 1
    return OriginRow(
        a.origin, a.limit + b.limit, a.ceiling + b.ceiling, a.open + b.open,
        a.connecting + b.connecting, a.waiting + b.waiting,
        (a.answer_ms * a.open + b.answer_ms * b.open) / weight if a.open + b.open
        else max(a.answer_ms, b.answer_ms),
        latest.reason, latest.changed_ms, a.workers + b.workers,
    )  # fmt: skip


def _at(raw: bytes | str) -> int:
    return _report(raw)[0]
