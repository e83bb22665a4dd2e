"""Which lake events a replay takes: the selection, and the events it selects.

A selection is a half-open range of event time `t` ([since, until): a replay of one day
then of the next takes each event once), topics, a type, the subscriber the events were
delivered to, and a URL prefix, each optional. An event delivered to several subscribers
is in the lake once per subscriber; selected, it is one event (one id), taken at its
first copy in the log. Selected events come in their original order: event time, then
where that copy is in the delivery log (partition, entry, place in the batch).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from app import clock, codec
from app.errors import InvalidInput
from app.models.trace_context import TraceContext
from spark.errors import SelectionError

if TYPE_CHECKING:
    from spark.lake_erase import Erasure

ORDER = ("t", "stream_partition", "stream_id", "position")  # stream ids as numbers
# what a replay reads of a row
COLUMNS = ("id", "topic", "type", "url", "t", "data", "traceparent", "tracestate", "key",
           "schema_version")  # fmt: skip
ID, TOPIC, TYPE, T, EVENT = range(5)  # a replay row's fields, as replay_rows() makes them


def instant(text: str) -> int:
    """Epoch milliseconds from ISO 8601 (UTC unless it names a zone) or epoch ms."""
    try:
        return clock.instant(text)
    except InvalidInput as exc:
        raise SelectionError(exc.message) from None


@dataclass(frozen=True)
class Selection:
    since_ms: int | None = None
    until_ms: int | None = None
    topics: tuple[str, ...] = ()
    type: str | None = None
    from_subscriber: str | None = None
    url_prefix: str | None = None
    # rows delivered before this (ms): a replay's selection stays what it was at its
    # start, whatever an ingest adds to the lake while it runs or before it resumes
    delivered_before_ms: int | None = None

    def __post_init__(self) -> None:
        since, until = self.since_ms, self.until_ms
        if since is not None and until is not None and until <= since:
            raise SelectionError("--until must be after --since: the range is empty")

    def where(self, frame: DataFrame) -> DataFrame:
        """The rows this selection keeps, before events are made one per id."""
        if self.since_ms is not None:
            frame = frame.where(F.col("t") >= self.since_ms)
        if self.until_ms is not None:
            frame = frame.where(F.col("t") < self.until_ms)
        if self.topics:
            frame = frame.where(F.col("topic").isin(list(self.topics)))
        if self.type is not None:
            frame = frame.where(F.col("type") == self.type)
        if self.from_subscriber is not None:
            frame = frame.where(F.col("subscriber") == self.from_subscriber)
        if self.url_prefix is not None:
            frame = frame.where(F.col("url").startswith(self.url_prefix))
        if self.delivered_before_ms is not None:
            before = F.expr(f"timestamp_millis({int(self.delivered_before_ms)})")
            frame = frame.where(F.col("delivered_at") < before)
        return frame


def without_erased(events: DataFrame, erasures: Sequence[Erasure]) -> DataFrame:
    """The rows no running erasure names (spark/lake_erase.py: its url or key, topics and
    `before`): between the workers' erasure of Redis and the lake's, a replay must not
    queue the entity's events again. A finished erasure's rows are gone from the lake."""
    for erasure in erasures:
        named = (F.col(erasure.by) == erasure.value) & (F.col("t") < erasure.before)
        if erasure.topics:
            named = named & F.col("topic").isin(list(erasure.topics))
        events = events.where(~F.coalesce(named, F.lit(False)))
    return events


def ordered(events: DataFrame, selection: Selection) -> DataFrame:
    """The selected rows in original order (ORDER: one sort, one shuffle), every copy of
    an event still there: once_each() keeps the first. Every copy of an event has the
    same `t` (its id is derived from its content, `t` included), so the copies are
    never far apart in this order."""
    return ordered_rows(events, selection, descending=False)


def ordered_rows(events: DataFrame, selection: Selection, descending: bool) -> DataFrame:
    """ordered(), or in the reverse order (the last event first)."""
    rows = selection.where(events)
    if "position" not in rows.columns:  # rows from before the column: file order stands
        rows = rows.withColumn("position", F.lit(0))
    entry = F.split(F.col("stream_id"), "-")  # `<ms>-<seq>`: numbers, not text
    keys = [F.col("t"), F.col("stream_partition"), entry[0].cast("long"),
            entry[1].cast("long"), F.col("position")]  # fmt: skip
    return rows.orderBy(*[k.desc() if descending else k for k in keys])


def published_columns() -> list[Any]:
    """COLUMNS with `data` as published: a route's transform shaped `data` for the
    subscriber it was sent to, and a replay's target applies its own (docs/transforms.md)."""
    data = F.coalesce(F.col("source_data"), F.col("data")).alias("data")
    return [data if c == "data" else c for c in COLUMNS]


def replay_rows(rows: Iterable[Sequence[Any]]) -> Iterator[tuple[str, str, str, int, bytes]]:
    """On the executors, in parallel: each row (COLUMNS) as (id, topic, type, t, the event
    packed for the queue), so the driver only routes and queues them."""
    for event_id, topic, type_, url, t, data, parent, state, key, schema in rows:
        trace = None if parent is None else TraceContext(parent, state)
        packed = codec.pack_replayed(topic, type_, url, t, data, event_id, trace, key, schema)
        yield event_id, topic, type_, t, packed


def once_each(
    rows: Iterable[Sequence[Any]], id_at: int = 0, t_at: int = 4
) -> Iterator[Sequence[Any]]:
    """`rows` (in ORDER) with each event once, at its first copy: only the ids of the
    current `t` are remembered."""
    seen: set[str] = set()
    now: Any = None
    for row in rows:
        if row[t_at] != now:
            now, seen = row[t_at], set()
        if row[id_at] in seen:
            continue
        seen.add(row[id_at])
        yield row


@dataclass(frozen=True)
class Summary:
    """What a dry run prints: events per topic and UTC day of `t`, the first and last."""

    counts: list[tuple[str, str, int]]  # (topic, day, events), in that order
    first: dict[str, object] | None
    last: dict[str, object] | None

    @property
    def total(self) -> int:
        return sum(n for _, _, n in self.counts)


def summary(events: DataFrame, selection: Selection, ends: bool = True) -> Summary:
    """Events per topic and UTC day (each event once), and with `ends` the first and
    last (a dry run shows them; a replay needs the counts only)."""
    rows = selection.where(events)
    day = F.date_format(F.expr("timestamp_millis(t)"), "yyyy-MM-dd").alias("day")
    grouped = rows.groupBy("topic", day).agg(F.countDistinct("id").alias("n"))
    counts = [(r["topic"], r["day"], r["n"]) for r in grouped.orderBy("topic", "day").collect()]
    if not ends or not counts:
        return Summary(counts, None, None)
    first, last = (
        ordered_rows(events, selection, descending).select(*COLUMNS[:5]).limit(1).collect()[0]
        for descending in (False, True)
    )
    return Summary(counts, first.asDict(), last.asDict())
