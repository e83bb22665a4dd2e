"""Where each read starts and ends, and the executor-side read of one stream range.

Shared by the batch and the streaming reader: both turn positions into one Spark input
partition per stream partition with new entries, so the streams are read in parallel.
The reader on the executor counts what it gets against what the planner expected, which
catches entries trimmed between planning and reading (the planner's own check cannot).
What an erasure took out of a stream is read from its `:erased` companion
(spark/erased.py) beside it: an entry erased whole counts as read and gives no row, one
rewritten is read in its place, at its id, less the erased events.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
import redis
from pyspark.sql.datasource import InputPartition

from spark import erased, offsets
from spark.errors import DataLossError
from spark.offsets import Entry, Position, StreamInfo
from spark.options import NAMED, SourceOptions, Spec

log = logging.getLogger(__name__)

CHUNK = 1000  # stream entries per XRANGE call and per Arrow record batch


@dataclass(frozen=True)
class StreamRange(InputPartition):
    """Entries (start.id, end.id] of one stream; `expected` None when it cannot be known."""

    partition: int
    key: str
    start: Position
    end: Position
    expected: int | None


def named(spec: str, info: StreamInfo) -> Position:
    return offsets.latest(info) if spec == "latest" else offsets.earliest(info)


def resolve(
    client: redis.Redis, options: SourceOptions, spec: Spec, infos: list[StreamInfo]
) -> dict[int, Position]:
    """Positions for every partition from an option; partitions missing from JSON: earliest."""
    if isinstance(spec, str):
        return {p: named(spec, info) for p, info in enumerate(infos)}
    positions: dict[int, Position] = {}
    for p, info in enumerate(infos):
        given = spec.get(p, "earliest")
        if given in NAMED:
            positions[p] = named(given, info)
        else:
            positions[p] = offsets.requested(
                client, options.key(p), given, p, options.fail_on_data_loss, options.label
            )
    return positions


def warn_unread_streams(client: redis.Redis, options: SourceOptions) -> None:
    """A stream beyond `partitions` means the workers log to more partitions than we read
    (BUSBAR_SHARDS differs): say so rather than silently skip events."""
    if client.exists(options.key(options.partitions)):
        log.warning(
            "%s: %s exists but partitions=%d; set the partitions option to "
            "BUSBAR_SHARDS or what it holds is never read",
            options.label,
            options.key(options.partitions),
            options.partitions,
        )


def plan(
    options: SourceOptions,
    start: Mapping[int, Position],
    end: Mapping[int, Position],
    trimmed: Mapping[int, int] | None = None,
) -> list[StreamRange]:
    """One range per partition that moved; `trimmed` = loss already reported by the planner."""
    ranges = []
    for p, stop in sorted(end.items()):
        begin = start.get(p)
        if begin is not None and offsets.parse_id(stop.id) <= offsets.parse_id(begin.id):
            continue
        expected = None
        if begin is not None:
            expected = stop.n - begin.n - (trimmed or {}).get(p, 0)
        since = begin or Position(offsets.ORIGIN, 0)
        ranges.append(StreamRange(p, options.key(p), since, stop, expected))
    return ranges


def read_chunk(
    client: redis.Redis, key: str, after: str, until: str
) -> tuple[list[Entry], list[erased.StandIn]]:
    """Up to CHUNK stream entries in (after, until], and the companion's erased entries
    among them (up to the last entry read, or `until` at the end), in one transaction:
    an entry erased while a range is read is in exactly one of the two, never in both
    (its erased events would reach the lake) nor in neither (it would look trimmed).
    Without a companion this costs one HGETALL of a missing key, in the same round trip."""
    pipe = client.pipeline(transaction=True)
    pipe.xrange(key, f"({after}", until, count=CHUNK)
    pipe.hgetall(erased.key(key))
    reply, companion = pipe.execute()
    chunk = offsets.entries_of(reply)
    reach = until if len(chunk) < CHUNK else chunk[-1][0].decode()
    found = erased.stand_ins(companion, offsets.parse_id(after), offsets.parse_id(reach))
    return chunk, found


def read_range(options: SourceOptions, part: StreamRange) -> Iterator[pa.RecordBatch]:
    """Read one range in chunks; compare the entries found with the entries expected."""
    got = 0
    to_record_batch = options.lake_table.to_record_batch
    with options.client() as client:
        cursor = part.start.id
        while True:
            chunk, found = read_chunk(client, part.key, cursor, part.end.id)
            got += len(chunk) + len(found)
            entries = erased.merged(chunk, found)
            if entries:
                batch = to_record_batch(part.partition, entries)
                if batch.num_rows:
                    yield batch
            if len(chunk) < CHUNK:
                break
            cursor = chunk[-1][0].decode()
    if part.expected is not None and got < part.expected:
        lost = part.expected - got
        message = (
            f"{options.label} partition {part.partition}: {lost} entries in "
            f"({part.start.id}, {part.end.id}] were trimmed (MAXLEN) before they were read"
        )
        if options.fail_on_data_loss:
            raise DataLossError(message + " (failOnDataLoss=true)")
        log.warning(message)
