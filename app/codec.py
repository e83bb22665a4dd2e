"""The only module that knows busbar's bytes: msgpack for events, routes and jobs.

Queued event entry (an element of a batch list, written by `publish.lua`):
    `<expires_at>|<event>` where expires_at is ASCII milliseconds (0 = never) and event
    is msgpack `[topic, type, url, t, data]` (data nil when absent), or
    `[topic, type, url, t, data, id]` when the publish named a publish id (id: text, see
    app/models/event_ids.py), and `[topic, type, url, t, data, id, traceparent]` or
    `[..., traceparent, tracestate]` when it carried a W3C trace context (id nil when
    there is none; docs/tracing.md), `[..., tracestate, key]` when the publisher gave
    an ordering key, and `[..., key, schema]` when its data was checked against its
    type's JSON Schema (the version; app/models/schemas.py) (absent values before the
    last nil): an event without them costs not a byte more, and entries queued before
    any of them existed read as events without. The prefix lets Lua
    read the expiry with one `string.find` without decoding the event; the event itself
    is encoded once per publish, whatever the number of subscribers.
Route table (in a topic's subscribers hash, each value `<shard>|<route table>`, written by
    `subscribe_route.lua`; unpacked with cmsgpack by `lib/ingest.lua`, the queueing step
    that `publish.lua` and `publish_queue.lua` share):
    msgpack map `{type: [lane, ttl_seconds, coalesce]}` for the types the subscriber
    takes on that topic; ttl 0 means BUSBAR_DEFAULT_TTL.
Job (member of the job queue sets and lists): msgpack `[name, args]`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack

from app.models.keys import LEGACY_LANE
from app.models.trace_context import TraceContext

EVENT_TYPES = ("create", "update", "delete", "noop")
FIXARRAY = {n: bytes([0x90 | n]) for n in (5, 6, 7, 8, 9, 10)}  # msgpack's headers of n-arrays
# msgpack ships no types (packb is Any to mypy); with autoreset, its default, it returns
# bytes. The same function, typed: packing stays one call.
_packb: Callable[..., bytes] = msgpack.packb


@dataclass(frozen=True)
class QueuedEvent:
    topic: str
    type: str
    url: str
    t: int
    data: dict[str, Any] | None
    expires_at: int
    stored_id: str | None = None  # given by a publish id; see app/models/event_ids.py
    traceparent: str | None = None  # the publish's trace context (docs/tracing.md)
    tracestate: str | None = None
    key: str | None = None  # the ordering key the publisher gave (docs/semantics.md)
    schema: int | None = None  # the version of its type's schema its data was checked by

    @property
    def trace(self) -> TraceContext | None:
        if self.traceparent is None:
            return None
        return TraceContext(self.traceparent, self.tracestate)

    def delivery(self) -> dict[str, Any]:
        """The shape a subscriber receives: `data` omitted when absent, like Routemaster."""
        body: dict[str, Any] = {
            "topic": self.topic,
            "type": self.type,
            "url": self.url,
            "t": self.t,
        }
        if self.data is not None:
            body["data"] = self.data
        if self.key is not None:
            body["key"] = self.key
        return body


def pack_data(data: dict[str, Any]) -> bytes:
    """An event's data alone: validation needs its size, and pack_event reuses the bytes."""
    return _packb(data, use_bin_type=True)


def pack_event(
    topic: str,
    type_: str,
    url: str,
    t: int,
    data: dict[str, Any] | None,
    packed_data: bytes | None = None,
    event_id: str | None = None,
    trace: TraceContext | None = None,
    key: str | None = None,
    schema: int | None = None,
) -> bytes:
    """`[topic, type, url, t, data]` (and `id`, the trace context, the ordering key and
    the schema version, when given); given
    data already packed, it is not packed twice (data is most of an event's bytes, and
    bulk publish is bound by this CPU)."""
    tail: list[str | int | None] = []
    if event_id is not None or trace or key is not None or schema is not None:
        tail = [event_id, *(trace or (None, None)), key, schema]
        while tail and tail[-1] is None:  # positions kept, absent values at the end cost nothing
            tail.pop()
    if packed_data is None:  # one pack of the whole array
        return _packb([topic, type_, url, t, data, *tail], use_bin_type=True)
    head = _packb([topic, type_, url, t], use_bin_type=True)
    # the 4-array header swapped for the whole array's
    packed = FIXARRAY[5 + len(tail)] + head[1:] + packed_data
    for value in tail:
        packed += _packb(value, use_bin_type=True)
    return packed


def untraced(packed: bytes) -> bytes:
    """A queued event's bytes (the part after `|`) as a 5-element array, without id or
    trace context: what a content-derived event id hashes (app/models/event_ids.py), so
    that the traceparent a publisher sends never changes an event's id."""
    unpacker = msgpack.Unpacker(raw=True)
    unpacker.feed(packed)
    unpacker.read_array_header()
    for _ in range(5):
        unpacker.skip()
    return FIXARRAY[5] + packed[1 : unpacker.tell()]


def pack_replayed(
    topic: str,
    type_: str,
    url: str,
    t: int,
    data_json: str | None,
    event_id: str,
    trace: TraceContext | None = None,
    key: str | None = None,
    schema: int | None = None,
) -> bytes:
    """A lake row (its `data` as JSON text) as a queued event that keeps the id it was
    delivered with, stored whole or as the part after `evt_` (app/models/event_ids.py),
    the trace context its publish gave it, its ordering key (so a replay to a
    subscriber with `concurrency` keeps each key's order, docs/semantics.md) and the
    schema version its data was checked against when it was published."""
    data = None if data_json is None else json.loads(data_json)
    stored = event_id.removeprefix("evt_")
    return pack_event(
        topic, type_, url, t, data, event_id=stored, trace=trace, key=key, schema=schema
    )


def reshaped_entry(entry: bytes, event: QueuedEvent, data: Any, event_id: str) -> bytes:
    """A queued entry with the data a transform gave it (app/delivery/shaping.py), as
    the delivery log keeps what was sent: the same expiry, fields, trace context and
    key, and the id the original had (stored: the log's readers derive ids from it)."""
    expires = entry.partition(b"|")[0]
    packed = pack_event(
        event.topic, event.type, event.url, event.t, data, event_id=event_id,
        trace=event.trace, key=event.key, schema=event.schema,
    )  # fmt: skip
    return expires + b"|" + packed


def pack_shaped(
    sent: list[bytes],
    source: list[bytes],
    dropped: list[int],
    failed: list[tuple[int, str]],
    version: int,
    max_dead: int,
    deferred: int = 0,
) -> bytes:
    """What a flight's transforms made, as lib/shaping.lua reads it: indexes count from
    0 here, from 1 there."""
    # bytes as msgpack's raw strings: the cmsgpack of Redis's Lua reads no bin type
    places = [i + 1 for i in dropped]
    failures = [[i + 1, why] for i, why in failed]
    return _packb([sent, source, places, failures, version, max_dead, deferred], use_bin_type=False)


def unpack_entry(entry: bytes) -> QueuedEvent:
    expires, _, packed = entry.partition(b"|")
    topic, type_, url, t, data, *stored_id = msgpack.unpackb(packed, raw=False)
    return QueuedEvent(topic, type_, url, t, data, int(expires), *stored_id)


# a route table's entry (app/models/route.py): (lane, ttl, coalesce), or where content
# filters decide, the candidates (lane, ttl, coalesce, filter number) in order
RouteEntry = tuple[int, int, bool] | list[tuple[int, int, bool, int]]


def pack_route_table(table: dict[str, RouteEntry]) -> bytes:
    return _packb({k: list(v) for k, v in table.items()}, use_bin_type=True)


def unpack_route(value: bytes) -> dict[str, RouteEntry]:
    """A topic's subscribers hash value, `<shard>|<route table>`: the table."""
    table = msgpack.unpackb(value.partition(b"|")[2], raw=False)
    found: dict[str, RouteEntry] = {}
    for t, v in table.items():
        if v and isinstance(v[0], list):
            found[t] = [(int(c[0]), int(c[1]), bool(c[2]), int(c[3])) for c in v]
        else:
            found[t] = (int(v[0]), int(v[1]), bool(v[2]))
    return found


def pack_job(name: str, args: list[Any]) -> bytes:
    return _packb([name, args], use_bin_type=True)


def unpack_job(packed: bytes) -> tuple[str, list[Any]]:
    name, args = msgpack.unpackb(packed, raw=False)
    return name, args


@dataclass(frozen=True)
class DeadLetter:
    event: QueuedEvent
    attempts: int
    failed_at: int
    lane: int
    last_status: str

    def describe(self) -> dict[str, Any]:
        return {
            **self.event.delivery(),
            "attempts": self.attempts,
            "failed_at": self.failed_at,
            "last_status": self.last_status,
        }


def unpack_dead_letter(raw: bytes) -> DeadLetter:
    """`<attempts>|<failed_at>|<lane>|<last_status>|<entry>`, written by deliver_fail.lua."""
    attempts, failed_at, lane, status, entry = raw.split(b"|", 4)
    return DeadLetter(
        unpack_entry(entry), int(attempts), int(failed_at), int(lane), status.decode()
    )


@dataclass(frozen=True)
class LoggedBatch:
    """One delivery log entry: an acknowledged batch."""

    subscriber: str
    priority: int | None  # None for the lane of routes without a priority
    batch_id: int
    created_at: int
    first_attempt_at: int
    delivered_at: int
    attempts: int
    events: list[QueuedEvent]
    # each event's entry as queued (`<expires_at>|<event>`): what its id is derived from
    entries: tuple[bytes, ...] = ()
    # where a route's transform changed what was sent: each sent event's entry as it was
    # queued, in the same order (`source`, deliver_ack.lua); () when none was changed
    sources: tuple[bytes, ...] = ()


def pack_log_events(entries: list[bytes]) -> bytes:
    """The `events` field deliver_ack.lua writes; for tools that fill a log without a worker."""
    return _packb(entries, use_bin_type=True)


def last_logged(fields: dict[bytes, bytes]) -> tuple[QueuedEvent, QueuedEvent] | None:
    """A delivery log entry's last event an erasure left ('' where it blanked one), as
    sent and as published (the same where no transform changed it); None for none."""
    entries = msgpack.unpackb(fields[b"events"], raw=True)
    sources = msgpack.unpackb(fields[b"source"], raw=True) if b"source" in fields else entries
    for sent, queued in zip(reversed(entries), reversed(sources), strict=True):
        if sent:
            return unpack_entry(sent), unpack_entry(queued)
    return None


def unpack_log_entry(fields: dict[bytes, bytes]) -> LoggedBatch:
    """A delivery log stream entry's fields, as written by deliver_ack.lua."""
    lane = int(fields[b"priority"])
    entries = msgpack.unpackb(fields[b"events"], raw=True)
    return LoggedBatch(
        subscriber=fields[b"subscriber"].decode(),
        priority=None if lane == LEGACY_LANE else lane,
        batch_id=int(fields[b"batch_id"]),
        created_at=int(fields[b"created_at"]),
        first_attempt_at=int(fields[b"first_attempt_at"]),
        delivered_at=int(fields[b"delivered_at"]),
        attempts=int(fields[b"attempts"]),
        events=[unpack_entry(e) for e in entries],
        entries=tuple(entries),
        sources=tuple(msgpack.unpackb(fields[b"source"], raw=True)) if b"source" in fields else (),
    )
