"""Erasures in the lake: one entity's rows deleted from the Delta tables (spark/delta.py).

The workers erase Redis first (app/services/erasure.py); once every Redis store is erased
they set the erasure's `redis_done_at`, and only then may a lake erase it: before that a
row could still arrive. The ingest that writes a lake erases it (spark/keeper.py), or
`busbar spark erase` for a lake no ingest runs on; what it removed goes on the erasure's
record as `lake:<lake id>`, which is also what says this lake is done.

Rows are found with a query (DataFusion, in delta-rs) and deleted by where they came
from (shard and stream entry, and the place in the batch for events), never by the url
or key itself: a Delta commit records its delete predicate in the log, which must not
name what was erased. The attempts go first (those of the batches the entity's events
were in, and those whose answer `body` names the value), then the events: a run cut
short between the two finds the events again and redoes the attempts with the same
outcome, where the other order would have lost which batches they were.

Exact across a kill: every delete commit carries the erasure's id in its commit info
(`busbar.erasure`), and what an erasure removed is read back from the tables' logs (the
rows and files of its commits, the bytes of those files), not counted as it goes. A run
killed between two commits, or between the last commit and the record, is finished by the
next with the same totals a single run gives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import redis
from deltalake import CommitProperties, DeltaTable, QueryBuilder

from app.models.keys import Keys
from spark.delta import is_delta, location, short_hash

IN_CHUNK = 5_000  # rows named in one delete (one commit, one rewrite of their files)
TAG = "busbar.erasure"  # the commit info field naming the erasure a delete was for
HISTORY_PAGE = 100
# an erasure's commits are looked for back to this long before its `redis_done_at` (none
# can be older: the lake erases only after it), whatever this machine's clock says
HISTORY_SLACK_MS = 3_600_000


def lake_id(output: str | Path) -> str:
    """The id a lake is registered under (`P{c}:lakes`): its output path, hashed."""
    return short_hash(location(output))


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class Erasure:
    """An erasure's record as the lake needs it (`value` is None once it was forgotten)."""

    id: str
    by: str  # "url" or "key"
    value: str | None
    topics: tuple[str, ...]
    before: int
    state: str
    redis_done_at: int | None
    lake_done: bool = False

    @classmethod
    def of(cls, erasure_id: str, fields: dict[str, str], lake: str | None) -> Erasure | None:
        if "match" not in fields:
            return None
        match = json.loads(fields["match"])
        by = "url" if "url" in match or "url_fingerprint" in match else "key"
        done = fields.get("redis_done_at")
        return cls(erasure_id, by, match.get(by), tuple(match.get("topics") or ()),
                   int(match.get("before") or 0), fields.get("state", ""),
                   int(done) if done else None,
                   lake is not None and f"lake:{lake}" in fields)  # fmt: skip


def erasures(client: redis.Redis, keys: Keys, lake: str | None = None) -> list[Erasure]:
    """Every erasure on record, oldest first; `lake_done` says whether `lake` erased it."""
    c = keys.catalog
    ids = [text(i) for i in client.zrange(c.erasures, 0, -1)]
    with client.pipeline(transaction=False) as pipe:
        for erasure_id in ids:
            pipe.hgetall(c.erasure(erasure_id))
        records = pipe.execute()
    found = []
    for erasure_id, raw in zip(ids, records, strict=True):
        fields = {text(k): text(v) for k, v in raw.items()}
        if (one := Erasure.of(erasure_id, fields, lake)) is not None:
            found.append(one)
    return found


def due(client: redis.Redis, keys: Keys, lake: str) -> list[Erasure]:
    """The erasures this lake has to carry out now: Redis erased, the lake not yet."""
    return [e for e in erasures(client, keys, lake)
            if e.redis_done_at is not None and not e.lake_done and e.value is not None]  # fmt: skip


def running(client: redis.Redis, keys: Keys) -> list[Erasure]:
    """The erasures under way (their value still known): what a replay leaves out."""
    return [e for e in erasures(client, keys) if e.state == "running" and e.value is not None]


def quoted(value: object) -> str:
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def match_sql(erasure: Erasure) -> str:
    """The events an erasure names, as SQL over the events table."""
    assert erasure.value is not None
    where = [f"{erasure.by} = {quoted(erasure.value)}", f"t < {int(erasure.before)}"]
    if erasure.topics:
        where.append(f"topic IN ({', '.join(quoted(t) for t in erasure.topics)})")
    return " AND ".join(where)


def query(table: DeltaTable, sql: str) -> pa.Table:
    return pa.table(QueryBuilder().register("t", table).execute(sql).read_all())


@dataclass
class Removed:
    rows: int = 0
    files: int = 0
    bytes: int = 0


def sizes(table: DeltaTable) -> dict[str, int]:
    actions = pa.table(table.get_add_actions(flatten=True))
    return dict(zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(),
                    strict=True))  # fmt: skip


def ranges(keys: list[str], days: list[Any]) -> str:
    """Where the rows are: per date, the range of their stream ids. The log's statistics
    on `stream_id` then skip every file of a date but those in its range; one range over
    all dates would span the days between and skip nothing (10 million rows in 200
    files: 150 files read to find 3, 1.25 s, against 17 ms so; bench.lake_erasure)."""
    by_day: dict[str, list[str]] = {}
    for key, day in zip(keys, days, strict=True):
        by_day.setdefault(str(day), []).append(key.split(":")[1])
    return " OR ".join(
        f"(date = {quoted(day)} AND stream_id >= {quoted(min(ids))} "
        f"AND stream_id <= {quoted(max(ids))})"
        for day, ids in sorted(by_day.items())
    )


def delete_rows(path: str, found: pa.Table, with_position: bool, erasure_id: str) -> None:
    """Delete the rows `found` names (date, stream_partition, stream_id[, position]),
    in commits of IN_CHUNK rows, each tagged with the erasure (tally() counts them)."""
    if found.num_rows == 0:
        return
    table = DeltaTable(path)
    tag = CommitProperties(custom_metadata={TAG: erasure_id})
    names = ["stream_partition", "stream_id", *(["position"] if with_position else [])]
    cols = [found.column(n).to_pylist() for n in names]
    dates = found.column("date").to_pylist()
    keys = [":".join("" if v is None else str(v) for v in row) for row in zip(*cols, strict=True)]
    parts = ", ".join(f"COALESCE(CAST({n} AS VARCHAR), '')" for n in names)
    for start in range(0, len(keys), IN_CHUNK):
        chunk, days = keys[start : start + IN_CHUNK], dates[start : start + IN_CHUNK]
        predicate = (
            f"({ranges(chunk, days)}) "
            f"AND concat_ws(':', {parts}) IN ({', '.join(quoted(k) for k in chunk)})"
        )
        table.delete(predicate, commit_properties=tag)
        table = DeltaTable(path)


def tagged_versions(path: str, erasure: Erasure) -> list[tuple[int, int]]:
    """(version, rows deleted) of every commit the table's log holds for the erasure:
    the log read back, newest first, to HISTORY_SLACK_MS before its `redis_done_at`."""
    table, limit = DeltaTable(path), HISTORY_PAGE
    since = (erasure.redis_done_at or 0) - HISTORY_SLACK_MS
    while True:
        history = table.history(limit)
        if len(history) < limit or int(history[-1].get("timestamp") or 0) < since:
            break
        limit *= 4
    return sorted(
        (int(c["version"]), int((c.get("operationMetrics") or {}).get("num_deleted_rows") or 0))
        for c in history if c.get(TAG) == erasure.id
    )  # fmt: skip


def tally(path: str, erasure: Erasure) -> Removed:
    """What the erasure's commits removed from one table, from its log: rows, and the
    files each commit dropped with their bytes (the versions before and after it)."""
    done = Removed()
    if not is_delta(path):
        return done
    for version, rows in tagged_versions(path, erasure):
        before = sizes(DeltaTable(path, version=version - 1))
        after = sizes(DeltaTable(path, version=version))
        gone = set(before) - set(after)
        done.rows += rows
        done.files += len(gone)
        done.bytes += sum(before[p] for p in gone)
    return done


def erase(output: str | Path, erasure: Erasure) -> dict[str, int]:
    """Delete one erasure's rows from the lake at `output` (attempts, then events: see the
    module docstring); what it removed, as `lake:<lake id>` records it (less `at`)."""
    base = str(output).rstrip("/")
    events_path, attempts_path = f"{base}/events", f"{base}/attempts"
    found = pa.table({"subscriber": [], "batch_id": []})
    if is_delta(events_path):
        found = query(DeltaTable(events_path), "SELECT subscriber, batch_id, stream_partition, "
                      f"stream_id, position, date FROM t WHERE {match_sql(erasure)}")  # fmt: skip
    if is_delta(attempts_path) and erasure.value is not None:
        pairs = sorted(set(zip(found.column("subscriber").to_pylist(),
                               found.column("batch_id").to_pylist(), strict=True)))  # fmt: skip
        where = [f"strpos(body, {quoted(erasure.value)}) > 0"]
        if pairs:
            named = ", ".join(quoted(f"{s}:{b}") for s, b in pairs)
            where.append(f"concat(subscriber, ':', CAST(batch_id AS VARCHAR)) IN ({named})")
        tried = query(DeltaTable(attempts_path), "SELECT stream_partition, stream_id, date "
                      f"FROM t WHERE {' OR '.join(where)}")  # fmt: skip
        delete_rows(attempts_path, tried, False, erasure.id)
    delete_rows(events_path, found, True, erasure.id)
    events, attempts = tally(events_path, erasure), tally(attempts_path, erasure)
    return {"events": events.rows, "attempts": attempts.rows,
            "files_rewritten": events.files + attempts.files,
            "bytes_rewritten": events.bytes + attempts.bytes}  # fmt: skip


def vacuum(output: str | Path, retention_hours: int) -> int:
    """Remove from storage the files the tables' logs dropped more than `retention_hours`
    ago (0: all of them now); how many."""
    removed = 0
    for name in ("events", "attempts"):
        path = f"{str(output).rstrip('/')}/{name}"
        if is_delta(path):
            removed += len(DeltaTable(path).vacuum(
                retention_hours=retention_hours, enforce_retention_duration=False,
                dry_run=False))  # fmt: skip
    return removed


def record(client: redis.Redis, keys: Keys, lake: str, erasure: Erasure,
           outcome: dict[str, int], now_ms: int) -> None:  # fmt: skip
    """What the lake removed, on the erasure's record: also what says it is done here."""
    value = json.dumps({**outcome, "at": now_ms})
    client.hset(keys.catalog.erasure(erasure.id), f"lake:{lake}", value)
