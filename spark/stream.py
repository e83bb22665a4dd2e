"""The streaming reader: plans micro-batches over one table's streams (spark/tables.py).

Spark keeps one instance of it in a long-lived Python process on the driver and calls
initialOffset (new query only: with a checkpoint Spark resumes from the checkpointed
offset instead), latestOffset, partitions and commit there; `read` runs on executors.
State kept between calls (the availableNow target, losses already reported) is
therefore plain data, and every call opens its own Redis connection.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import redis
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from spark import offsets, ranges
from spark.offsets import Position, StreamInfo
from spark.options import SourceOptions

log = logging.getLogger(__name__)


class BusbarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.target: dict[int, Position] | None = None  # availableNow: nothing past this
        self.trimmed: dict[tuple[int, Position], int] = {}  # losses already reported
        self.dropped_reported = False

    def initialOffset(self) -> dict:
        """Where a query without a checkpoint starts: the startingOffsets option."""
        with self.options.client() as client:
            ranges.warn_unread_streams(client, self.options)
            infos = offsets.stream_infos(client, self.options.keys())
            start = ranges.resolve(client, self.options, self.options.starting, infos)
        return offsets.to_offset(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        """maxBatchesPerTrigger caps log entries per micro-batch, across partitions."""
        if self.options.max_per_trigger:
            return ReadMaxRows(self.options.max_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """availableNow reads what exists now and stops, even while workers keep logging."""
        with self.options.client() as client:
            infos = offsets.stream_infos(client, self.options.keys())
        self.target = {p: offsets.latest(info) for p, info in enumerate(infos)}

    def reportLatestOffset(self) -> dict | None:
        with self.options.client() as client:
            infos = offsets.stream_infos(client, self.options.keys())
        return offsets.to_offset({p: offsets.latest(info) for p, info in enumerate(infos)})

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """Check where we resume from (trimmed? ahead?), then how far this batch may go."""
        with self.options.client() as client:
            infos = offsets.stream_infos(client, self.options.keys())
            begin = self._starts(start, infos)
            bound = {
                p: self._bound(begin[p], self.target.get(p) if self.target else None, info)
                for p, info in enumerate(infos)
            }
            if isinstance(limit, ReadMaxRows):
                end = self._capped(client, begin, bound, infos, limit.max_rows)
            else:
                end = bound
        return offsets.to_offset(end)

    def _starts(self, start: dict, infos: list[StreamInfo]) -> dict[int, Position]:
        """Positions to resume from, checked once each; a partition new to the offset (the
        partitions option grew) starts at its earliest entry."""
        given = offsets.from_offset(start)
        dropped = sorted(p for p in given if p >= len(infos))
        if dropped and not self.dropped_reported:  # once per run, not at every trigger
            self.dropped_reported = True
            log.warning(
                "%s: the checkpoint has partitions %s but partitions=%d; they are no longer read",
                self.options.label,
                dropped,
                len(infos),
            )
        begin: dict[int, Position] = {}
        for p, info in enumerate(infos):
            if p not in given:
                begin[p] = offsets.earliest(info)
                continue
            begin[p] = given[p]
            if (p, given[p]) not in self.trimmed:
                lost = offsets.check(
                    given[p], info, p, self.options.fail_on_data_loss, self.options.label
                )
                self.trimmed[(p, given[p])] = lost
        return begin

    @staticmethod
    def _bound(begin: Position, target: Position | None, info: StreamInfo) -> Position:
        """The furthest this partition may go: the stream's end or the availableNow target."""
        stop = target or offsets.latest(info)
        return stop if offsets.parse_id(stop.id) > offsets.parse_id(begin.id) else begin

    def _capped(
        self,
        client: redis.Redis,
        begin: dict[int, Position],
        bound: dict[int, Position],
        infos: list[StreamInfo],
        budget: int,
    ) -> dict[int, Position]:
        """Share `budget` entries fairly between partitions with entries waiting."""
        waiting = {p: bound[p].n - offsets.floor(begin[p], infos[p]).n for p in bound}
        take: dict[int, int] = {}
        todo = sorted((p for p in waiting if waiting[p] > 0), key=lambda p: waiting[p])
        for index, p in enumerate(todo):
            share = budget // (len(todo) - index)
            take[p] = min(waiting[p], share)
            budget -= take[p]
        end = dict(bound)
        for p in bound:
            wanted = take.get(p, 0)
            if wanted >= waiting[p]:
                continue
            end[p] = begin[p] if wanted <= 0 else self._nth(client, p, begin[p], bound[p], wanted)
        return end

    def _nth(
        self, client: redis.Redis, p: int, begin: Position, stop: Position, n: int
    ) -> Position:
        """The position after reading n more entries, from one atomic XINFO + XRANGE and
        the companion: an erased entry is one of the n (positions count it), though it
        gives no row or only some."""
        key = self.options.key(p)
        pipe = client.pipeline(transaction=True)
        offsets.queue_info(pipe, key)
        pipe.xrange(key, f"({begin.id}", stop.id, count=n)
        *replies, entries = pipe.execute()
        info = StreamInfo.from_replies(*replies)
        since = offsets.floor(begin, info)  # entries gone before the oldest held: not read
        ids = sorted(
            {offsets.parse_id(raw_id.decode()) for raw_id, _ in entries}
            | set(info.erased_in(since.id, stop.id))
        )[:n]
        if not ids:
            return begin
        return Position(offsets.format_id(ids[-1]), since.n + len(ids))

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """One input partition per stream partition with new entries: read in parallel."""
        begin = offsets.from_offset(start)
        reported = {p: self.trimmed.get((p, pos), 0) for p, pos in begin.items()}
        return list(ranges.plan(self.options, begin, offsets.from_offset(end), reported))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return ranges.read_range(self.options, partition)  # type: ignore[arg-type]

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to acknowledge: the log is trimmed by MAXLEN, not by readers. Forget the
        loss reports of positions we are past."""
        done = offsets.from_offset(end)
        self.trimmed = {k: v for k, v in self.trimmed.items() if k[1] == done.get(k[0])}
