"""A subscriber's attempt log, read: what happened to each delivery attempt, newest first.

The scripts that settle an attempt append it (deliver_ack, deliver_fail: app/models/
keys.py's `attempts`), so the log holds exactly the attempts whose answers were
recorded; the same step appends it to the shard's attempt stream, the lake's, whose
entries spark/attempt_rows.py reads with shown() below, so both say the same. An
attempt held back unsent (its failing share was full) is not one. Reading filters by
outcome, time and batch, and pages with a cursor: the `next` of a page is where the
following one starts, so a page never repeats or skips an entry however many attempts
are appended meanwhile.

Outcomes: `2xx`, `3xx`, `4xx`, `5xx` by the answer's status; `timeout` (no answer in
BUSBAR_TIMEOUT, or cut as slow while the failing share was full); `connection` (no
answer for another reason: refused, DNS, TLS, reset, an answer that is not HTTP, an
address the callback policy refuses); `abandoned` (begun and never settled: the worker
died, or lost Redis, and a scrub gave its job back). Each entry says why in `reason`
when there was no status, in the words of docs/semantics.md; never an address the bus
may not call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import redis

from app import codec
from app.errors import InvalidInput, NotFound
from app.models import event_ids, partitions
from app.models.attempt_result import MARK, OUTCOMES, outcome_of_reason
from app.models.keys import BATCH_HEADER, Keys
from app.models.validate import digits
from config.settings import Settings

MOST = 1000  # entries a page holds at most
LATEST_MS = 10**15 - 1  # 15 digits of epoch ms (the year 33658): what the API documents
SCAN = 500  # entries read from Redis at a time while filtering
Entries = list[tuple[bytes, dict[bytes, bytes]]]  # XREVRANGE's answer (redis-py types it loosely)


def kept(settings: Settings, now: int) -> tuple[int, int, int]:
    """The attempt log's bounds the scripts take: attempts kept per subscriber, the
    oldest kept (ms), and the approximate MAXLEN of the shard's attempt stream (the
    lake's: app/models/keys.py's `attempts` of a shard), each 0 when off."""
    oldest = now - settings.attempt_log_age_s * 1000
    return settings.attempt_log, oldest, settings.attempt_stream_maxlen


def outcome(status: str) -> str:
    """The class of a stored attempt, as the filter names it, from its status as the log
    keeps it (app/models/attempt_result.py's text: a code first, or a reason)."""
    code = status.split(" ", 1)[0]
    if digits(code) and len(code) == 3:
        return f"{code[0]}xx"
    return outcome_of_reason(code)


def retry_after_ms(fields: dict[bytes, bytes], status: str) -> int | None:
    """The wait a 429/503 asked for, as the script stored it beside the status. An
    entry written by busbar 0.2.0 or earlier has it only in the status (`503
    retry-after 2000`): read there, until such entries have aged out of the log
    (BUSBAR_ATTEMPT_LOG_AGE_S)."""
    if b"retry_after_ms" in fields:
        return int(fields[b"retry_after_ms"])
    _, mark, wait = status.partition(MARK)
    return int(wait) if mark and digits(wait) else None


def shown(entry_id: bytes, fields: dict[bytes, bytes]) -> dict[str, Any]:
    """One attempt as GET /subscriber/attempts lists it."""
    status = fields.get(b"status", b"").decode()
    code = status.split(" ", 1)[0]
    numeric = digits(code) and len(code) == 3
    return {
        "id": entry_id.decode(),
        "at": int(entry_id.split(b"-", 1)[0]),
        "batch": fields.get(b"batch", b"").decode(),
        "events": int(fields.get(b"events", b"0")),
        "lane": int(fields.get(b"lane", b"0")),
        "attempt": int(fields.get(b"attempt", b"0")),
        "worker": fields.get(b"worker", b"").decode(),
        "duration_ms": int(fields.get(b"duration_ms", b"0")),
        "outcome": outcome(status),
        "status": int(code) if numeric else None,
        "reason": None if numeric else code,
        "retry_after_ms": retry_after_ms(fields, status),
        "body": fields.get(b"body", b"").decode("utf-8", "replace"),
        # which partition (`<n>.<p>`) of a subscriber of concurrency n > 1; null at 1
        "partition": fields[b"partition"].decode() if b"partition" in fields else None,
        # the version of the subscription's transforms the attempt ran; null: none
        "transform_version": (
            int(fields[b"transform_version"]) if b"transform_version" in fields else None
        ),
    }


@dataclass(frozen=True)
class Query:
    """Which attempts a page lists: all filters optional, times half-open [since, until)."""

    outcomes: frozenset[str] = frozenset()
    since_ms: int | None = None
    until_ms: int | None = None
    batch: str | None = None
    limit: int = 100
    before: str | None = None  # a page's `next`: the entries older than that one

    def __post_init__(self) -> None:
        unknown = sorted(self.outcomes - set(OUTCOMES))
        if unknown:
            raise InvalidInput(f"outcome must be among {', '.join(OUTCOMES)}: not {unknown[0]}")
        if not 1 <= self.limit <= MOST:
            raise InvalidInput(f"limit must be between 1 and {MOST}")
        if self.before is not None and not _is_entry_id(self.before):
            raise InvalidInput("before must be the `next` of an earlier page")
        for name, ms in (("since", self.since_ms), ("until", self.until_ms)):
            if ms is not None and not 0 <= ms <= LATEST_MS:
                raise InvalidInput(f"{name} must be between 1970 and {LATEST_MS} epoch ms")

    def wants(self, entry: dict[str, Any]) -> bool:
        return (not self.outcomes or entry["outcome"] in self.outcomes) and (
            self.batch is None or entry["batch"] == self.batch
        )


def _is_entry_id(text: str) -> bool:
    ms, dash, seq = text.partition("-")
    return digits(ms) and bool(dash) and digits(seq) and len(ms) <= 15 and len(seq) <= 18


class AttemptLog:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._client = client
        self._keys = keys

    def page(self, token: str, query: Query) -> dict[str, Any]:
        """`{"attempts": [...newest first], "next": cursor or None}`."""
        key = self._keys.attempts(token)
        high = f"({_canonical(query.before)}" if query.before else "+"
        if query.until_ms is not None:
            until = f"({query.until_ms}-0"
            high = until if high == "+" or _older(until[1:], high[1:]) else high
        low = "-" if query.since_ms is None else f"{query.since_ms}-0"
        if high == "(0-0":  # nothing comes before the first id there can be
            return {"attempts": [], "next": None}
        found: list[dict[str, Any]] = []
        while len(found) < query.limit:
            entries = cast(Entries, self._client.xrevrange(key, high, low, count=SCAN))
            for entry_id, fields in entries:
                entry = shown(entry_id, fields)
                if query.wants(entry):
                    found.append(entry)
                    if len(found) == query.limit:
                        break
            if len(entries) < SCAN:
                break
            high = f"({entries[-1][0].decode()}"
        more = len(found) == query.limit
        return {"attempts": found, "next": found[-1]["id"] if more else None}


def _canonical(entry_id: str) -> str:
    """A cursor as Redis writes stream ids: `000-0` is the id `0-0`, before which nothing
    can come (Redis refuses an exclusive range from it, and the page would be a 500)."""
    ms, _, seq = entry_id.partition("-")
    return f"{int(ms)}-{int(seq)}"


def _older(a: str, b: str) -> bool:
    """Whether stream id `a` comes before `b`."""
    ams, _, aseq = a.partition("-")
    bms, _, bseq = b.partition("-")
    return (int(ams), int(aseq or 0)) < (int(bms), int(bseq or 0))


def queued_batch(client: redis.Redis, keys: Keys, token: str, batch_id: str) -> dict[str, Any]:
    """A batch's events, from an attempt one click away: while the batch is queued (in
    flight included). Once delivered, its events are in the delivery log and the lake;
    once dead-lettered, in the dead letters; either way NotFound says so."""
    if not digits(batch_id) or len(batch_id) > 18:
        raise InvalidInput("a batch id is the number an attempt names")
    raw = cast(list[bytes], client.lrange(keys.batch(token, batch_id), 0, -1))
    if not raw:
        raise NotFound(
            f"batch {batch_id} is not queued: delivered (see the lake), dead-lettered (see "
            "the dead letters) or dropped"
        )
    header, entries = raw[: len(BATCH_HEADER)], raw[len(BATCH_HEADER) :]
    lane, created, tried = (int(v) for v in header)
    pipe = client.pipeline(transaction=False)
    for pid in partitions.pids(client, keys, token):
        pipe.hmget(keys.flight(pid), "inflight", "more")
    # the batch a flight began, or one gathered into a broker's flight with it (`more`)
    flying = [(mark or b"").split() for flight in pipe.execute() for mark in flight]
    inflight = any(batch_id.encode() in ids for ids in flying)
    events = []
    for entry in entries:
        event = codec.unpack_entry(entry)
        events.append({"id": event_ids.of_entry(entry, event), **event.delivery()})
    return {
        "batch": batch_id, "lane": lane, "created_at": created, "attempts": tried,
        "in_flight": inflight, "events": events,
    }  # fmt: skip
