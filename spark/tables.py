"""The lake's tables, each written from one Redis stream per shard: what the source's
`table` option picks, so both are read by the one `busbar` source (offsets, trimming,
parallel reads and exactly-once are the same code) and differ only here.

    events    the delivery log (`P{s:N}:deliveries`), one row per delivered event
    attempts  the attempt stream (`P{s:N}:attempts`), one row per delivery attempt

Executors look a table up by name: a Table is never pickled, only its name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.types import StructType

from app.models.keys import Place
from spark import attempt_rows, rows
from spark.offsets import Entry


@dataclass(frozen=True)
class Table:
    name: str  # the source's `table` option, and the directory under the ingest's --output
    label: str  # how messages name its streams
    stream: Callable[[Place], str]  # a shard's stream of it
    schema: StructType
    to_record_batch: Callable[[int, Iterable[Entry]], pa.RecordBatch]
    time_column: str  # the lake's `date` partition is this column's UTC date


def _delivery_log(place: Place) -> str:
    return place.delivery_log


def _attempt_stream(place: Place) -> str:
    return place.attempt_stream


EVENTS = Table(
    "events", "busbar delivery log", _delivery_log, rows.SCHEMA, rows.to_record_batch,
    "delivered_at",
)  # fmt: skip
ATTEMPTS = Table(
    "attempts", "busbar attempt stream", _attempt_stream, attempt_rows.SCHEMA,
    attempt_rows.to_record_batch, "at",
)  # fmt: skip
TABLES = {t.name: t for t in (EVENTS, ATTEMPTS)}
