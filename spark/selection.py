"""Which lake events a replay takes: the selection, and the events it selects.

A selection is a half-open range of event time `t` ([since, until): a replay of one day
then of the next takes each event once), topics, a type, the subscriber the events were
delivered to, and a URL prefix, each optional. An event delivered to several subscribers
is in the lake once per subscriber; selected, it is one event (one id), taken at its
first delivery. Selected events come in their original order: event time, then where the
first delivery put them (delivery log entry, then place in the batch).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark.errors import SelectionError

ORDER = ("t", "stream_partition", "stream_id", "position")


def instant(text: str) -> int:
    """Epoch milliseconds from ISO 8601 (UTC unless it names a zone) or epoch ms."""
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise SelectionError(f"{text!r} is neither ISO 8601 nor epoch milliseconds") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


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


def selected(events: DataFrame, selection: Selection) -> DataFrame:
    """One row per selected event (its first delivery's), in original order (ORDER)."""
    rows = selection.where(events)
    if "position" not in rows.columns:  # rows from before the column: file order stands
        rows = rows.withColumn("position", F.lit(0))
    first = Window.partitionBy("id").orderBy("delivered_at", *ORDER[1:])
    one = rows.withColumn("_n", F.row_number().over(first)).where(F.col("_n") == 1)
    return one.drop("_n").orderBy(*ORDER)


@dataclass(frozen=True)
class Summary:
    """What a dry run prints: events per topic and UTC day of `t`, the first and last."""

    counts: list[tuple[str, str, int]]  # (topic, day, events), in that order
    first: dict[str, object] | None
    last: dict[str, object] | None

    @property
    def total(self) -> int:
        return sum(n for _, _, n in self.counts)


def summary(chosen: DataFrame) -> Summary:
    day = F.date_format(F.expr("timestamp_millis(t)"), "yyyy-MM-dd")
    counts = chosen.groupBy("topic", day.alias("day")).count().orderBy("topic", "day").collect()
    shown = ["id", "topic", "type", "url", "t"]
    first = chosen.select(*shown).limit(1).collect()
    last = chosen.orderBy(*[F.col(c).desc() for c in ORDER]).select(*shown).limit(1).collect()
    return Summary(
        [(r["topic"], r["day"], r["count"]) for r in counts],
        first[0].asDict() if first else None,
        last[0].asDict() if last else None,
    )
