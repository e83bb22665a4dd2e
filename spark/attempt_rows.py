"""The attempts table's schema, and attempt stream entries turned into Arrow record batches.

One row per delivery attempt, from the shard's attempt stream (app/models/keys.py:
`P{s:N}:attempts`), read exactly as the API reads a subscriber's own attempt log:
app/models/attempts.py's shown() parses each entry, so the lake's outcome, status,
reason and retry_after_ms are the ones GET /subscriber/attempts gives for the same
attempt, and a change of the entry's shape is made in one place. The subscriber is its
client's name, as the stream holds it; no token is ever written there.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from app.models import attempts
from spark.offsets import Entry

SCHEMA = StructType(
    [
        StructField("at", TimestampType()),
        StructField("subscriber", StringType()),
        StructField("batch_id", LongType()),
        StructField("events", IntegerType()),
        StructField("lane", IntegerType()),
        StructField("attempt", IntegerType()),
        StructField("worker", StringType()),
        StructField("duration_ms", LongType()),
        StructField("outcome", StringType()),
        StructField("status", IntegerType()),
        StructField("reason", StringType()),
        StructField("retry_after_ms", LongType()),
        StructField("body", StringType()),
        StructField("stream_partition", IntegerType()),
        StructField("stream_id", StringType()),
    ]
)
ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")
# shown()'s keys that are columns as they are
SAME = ("events", "lane", "attempt", "worker", "duration_ms", "outcome", "status", "reason",
        "retry_after_ms", "body")  # fmt: skip


def to_record_batch(partition: int, entries: Iterable[Entry]) -> pa.RecordBatch:
    """Stream entries (as XRANGE returns them), one row each."""
    columns: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    for raw_id, fields in entries:
        attempt = attempts.shown(raw_id, fields)
        columns["at"].append(attempt["at"] * 1000)  # Arrow timestamps here are microseconds
        columns["subscriber"].append(fields.get(b"subscriber", b"").decode() or None)
        batch = attempt["batch"]
        columns["batch_id"].append(int(batch) if batch.isdigit() else None)
        for name in SAME:
            columns[name].append(attempt[name])
        columns["stream_partition"].append(partition)
        columns["stream_id"].append(attempt["id"])
    arrays = [pa.array(columns[f.name], type=f.type) for f in ARROW_SCHEMA]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
