"""A flight's events as its routes' transforms shape them, in the worker, just before
the send (docs/transforms.md, Where it runs).

The subscriber hash's `transforms` (app/models/route.py's transform_table) lists, for
each topic one of whose routes transforms, every route of that topic. An event's route
is found again from its topic, its type and the lane its batch was queued on: the first
route there for its type whose filter, if any, the original event matches (the filters
decided at publish on the original too). A route without a transform sends the event
as it came. Each event's transform gives it one of three fates: sent with its output
as `data`; dropped (null or undefined: acknowledged, never sent, counted as
`transformed_out`); or failed, a bound hit or an expression error (dead-lettered alone
with status `transform_failed <bound>`, an operational event telling it). The stored
table is compiled once per content and kept, so a subscription's transforms are
compiled once per worker and per version, not once per batch.
"""

from __future__ import annotations

import functools
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from app import codec
from app.errors import InvalidInput
from app.models import event_ids
from app.models.filters import Bounds as FilterBounds
from app.models.filters import Filter, parse_filter, view_of
from app.models.transform import (
    Bounds,
    Transform,
    TransformFailed,
    event_data,
    parse_transform,
)

REMEMBERED = 1024  # compiled tables kept (one per subscription with transforms)
FAILED = "transform_failed"  # the status a failed event is dead-lettered with
# stored filters were bounded when they were saved: read back whatever the bounds now
STORED = FilterBounds(max_bytes=1 << 30, max_depth=1 << 10, max_conditions=1 << 20)


@dataclass(frozen=True)
class Broken:
    """A stored transform this process cannot compile (it compiled when it was saved:
    another version of the package, say): each event it meets fails, named so."""

    source: str
    why: str

    def apply(self, _event: dict[str, Any], _limits: Bounds) -> Any:
        raise TransformFailed("error", self.why)


@dataclass(frozen=True)
class Candidate:
    lane: int
    types: frozenset[str]
    content: Filter | None
    transform: Transform | Broken | None


def compiled(source: str | None, output_bytes: int) -> Transform | Broken | None:
    if source is None:
        return None
    try:
        return parse_transform(source, "transform", 1 << 30, output_bytes)
    except InvalidInput as exc:
        return Broken(source, exc.message)


Table = dict[str, list[Candidate]]


@dataclass
class Shaped:
    """A flight's events after their transforms: `events`, in batch order, the ones to
    send (data replaced where a transform gave one); `sent`, their entries as queued
    but with the data sent (what the delivery log and the lake keep), each keeping the
    id the subscriber receives; `dropped`, the indexes in the flight's entries of those
    that gave nothing; `failed`, (index, status) of each that failed; `deferred`, how
    many of its last events were not reached in the batch's time."""

    events: list[codec.QueuedEvent] = field(default_factory=list)
    entries: list[bytes] = field(default_factory=list)  # the originals of `events`
    sent: list[bytes] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    failed: list[tuple[int, str]] = field(default_factory=list)
    deferred: int = 0  # BUSBAR_TRANSFORM_BATCH_MS: they stay queued, for the next delivery

    @property
    def nothing_to_send(self) -> bool:
        return not self.events


def compile_table(raw: bytes, output_bytes: int) -> Table:
    """The stored `transforms` field, compiled. A stored expression that no longer
    compiles (it was checked when saved) fails each event it meets instead."""
    table: Table = {}
    for topic, routes in json.loads(raw).items():
        table[topic] = [
            Candidate(
                int(lane),
                frozenset(types),
                None if content is None else parse_filter(content, "filter", STORED),
                compiled(source, output_bytes),
            )
            for lane, types, content, source in routes
        ]
    return table


def route_of(table: Table, event: codec.QueuedEvent, lane: int) -> Candidate | None:
    """The route `event` took on `lane`, as route_tables() chose it at publish."""
    view: dict[str, Any] | None = None
    for c in table.get(event.topic, ()):
        if c.lane != lane or event.type not in c.types:
            continue
        if c.content is None:
            return c
        if view is None:
            view = view_of(event.delivery())
        if c.content.matches(view):
            return c
    return None


class Made(NamedTuple):
    """What shape_batch() made, as it crosses from the process that ran it: bytes and
    numbers only (Shaped's events are unpacked again on this side)."""

    sent: list[bytes]
    entries: list[bytes]
    dropped: list[int]
    failed: list[tuple[int, str]]
    deferred: int
    cpu_s: float = 0.0  # the CPU time the batch's transforms took (the slow lane's share)


@functools.lru_cache(maxsize=REMEMBERED)
def table_of(raw: bytes, output_bytes: int) -> Table:
    """A stored table compiled, once per content in each process that runs them."""
    return compile_table(raw, output_bytes)


def shape_batch(
    raw: bytes, lane: int, entries: list[bytes], bounds: Bounds, batch_s: float,
    cpu_s: float = math.inf,
) -> Made:  # fmt: skip
    """Every event of a batch through its route's transform, within `batch_s` in all
    and `cpu_s` of this process's CPU time (the slow lane's share: its wait for a CPU
    is not counted against it), the rest deferred (at least one event a delivery, so it
    moves on); and the CPU time that took. Run in one of Shaper's processes."""
    began = time.process_time()
    table = table_of(raw, bounds.output_bytes)
    made = _shaped(table, lane, entries, bounds, time.monotonic() + batch_s, began + cpu_s)
    return made._replace(cpu_s=time.process_time() - began)


def _shaped(
    table: Table, lane: int, entries: list[bytes], bounds: Bounds, until: float, cpu_until: float
) -> Made:
    made = Made([], [], [], [], 0)
    for i, entry in enumerate(entries):
        if i and (time.monotonic() > until or time.process_time() > cpu_until):
            return made._replace(deferred=len(entries) - i)
        event = codec.unpack_entry(entry)
        route = route_of(table, event, lane)
        if route is None or route.transform is None:
            made.sent.append(entry)
            made.entries.append(entry)
            continue
        try:
            output = event_data(route.transform.apply(event.delivery(), bounds))
        except TransformFailed as failed:
            made.failed.append((i, f"{FAILED} {failed.bound}"))
            continue
        if output is None:
            made.dropped.append(i)
            continue
        event_id = event_ids.of_entry(entry, event).removeprefix("evt_")
        made.sent.append(codec.reshaped_entry(entry, event, output, event_id))
        made.entries.append(entry)
    return made
