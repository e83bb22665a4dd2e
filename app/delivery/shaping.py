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

import json
import time
from dataclasses import dataclass, field
from typing import Any

from app import codec
from app.delivery.flight import Flight
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


class Shaper:
    """One per engine: the compiled tables it has met, the bounds of an evaluation, and
    how long one batch's evaluations may take in all (`batch_s`): a batch of many
    events, each near the time bound, would otherwise hold its delivery past its lease
    (and forever: each attempt would take as long)."""

    def __init__(self, bounds: Bounds, batch_s: float = 0.5) -> None:
        self._bounds = bounds
        self._batch_s = batch_s
        self._tables: dict[bytes, Table] = {}

    def table(self, raw: bytes) -> Table:
        found = self._tables.get(raw)
        if found is None:
            if len(self._tables) >= REMEMBERED:
                self._tables.clear()
            found = self._tables[raw] = compile_table(raw, self._bounds.output_bytes)
        return found

    def shape(self, flight: Flight) -> Shaped:
        """Every event of `flight` through its route's transform (blocking: the engine
        runs it off its loop, app/delivery/steps.py)."""
        table = self.table(flight.transforms)
        shaped = Shaped()
        until = time.monotonic() + self._batch_s
        for i, entry in enumerate(flight.entries):
            if i and time.monotonic() > until:  # at least one a delivery: it moves on
                shaped.deferred = len(flight.entries) - i
                break
            event = codec.unpack_entry(entry)
            route = route_of(table, event, flight.lane)
            if route is None or route.transform is None:
                shaped.events.append(event)
                shaped.entries.append(entry)
                shaped.sent.append(entry)
                continue
            try:
                output = event_data(route.transform.apply(event.delivery(), self._bounds))
            except TransformFailed as failed:
                shaped.failed.append((i, f"{FAILED} {failed.bound}"))
                continue
            if output is None:
                shaped.dropped.append(i)
                continue
            event_id = event_ids.of_entry(entry, event).removeprefix("evt_")
            new = codec.reshaped_entry(entry, event, output, event_id)
            shaped.events.append(codec.unpack_entry(new))
            shaped.entries.append(entry)
            shaped.sent.append(new)
        return shaped
