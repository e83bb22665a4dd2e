"""The data source's schema, and stream entries turned into Arrow record batches.

One row per delivered EVENT (a log entry is a batch of events), so the lake answers
per-event questions without exploding anything. Each row carries the event's id, the one
a subscription with `event_ids` receives (app/models/event_ids.py): the same published
event delivered to several subscribers is one event to whoever reads the lake. Rows are
built column-wise straight into Arrow: PySpark accepts record batches from `read()`,
which skips its per-value conversion of Python tuples (the bulk of the cost at 100k+
events).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import msgpack
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

from app import codec
from app.models import event_ids
from spark.offsets import Entry

SCHEMA = StructType(
    [
        StructField("id", StringType()),
        StructField("subscriber", StringType()),
        StructField("topic", StringType()),
        StructField("type", StringType()),
        StructField("url", StringType()),
        StructField("t", LongType()),
        StructField("data", StringType()),
        StructField("priority", IntegerType()),
        StructField("batch_id", LongType()),
        StructField("position", IntegerType()),
        StructField("attempts", IntegerType()),
        StructField("created_at", TimestampType()),
        StructField("first_attempt_at", TimestampType()),
        StructField("delivered_at", TimestampType()),
        StructField("stream_partition", IntegerType()),
        StructField("stream_id", StringType()),
        StructField("traceparent", StringType()),  # the publish's W3C trace context
        StructField("tracestate", StringType()),
        StructField("key", StringType()),  # the ordering key its publisher gave, if any
        # the version of its type's JSON Schema its data was checked against, if any
        StructField("schema_version", IntegerType()),
        # the data as published where the subscriber's route transformed it (`data` holds
        # what was sent: docs/transforms.md); null where `data` is as published. What a
        # replay queues again, for its target's own transform to shape.
        StructField("source_data", StringType()),
    ]
)
ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")


# Built once: json.dumps with options makes a new encoder per call, a third of the decode cost
_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)
PER_BATCH = (  # columns with one value per log entry, repeated for each of its events
    "subscriber",
    "priority",
    "batch_id",
    "attempts",
    "created_at",
    "first_attempt_at",
    "delivered_at",
    "stream_partition",
    "stream_id",
)


def _kept(fields: dict[bytes, bytes]) -> tuple[Sequence[int], dict[bytes, bytes]]:
    """The places in the batch of the events an erasure left (it blanks each erased one,
    '', so the others keep their `position`), and the fields with those alone. Decoding
    `events` once more here costs under 1% of a row's making (0.7 ms of 180 for 20,000
    events); the fields are rebuilt only for an entry with blanks."""
    events = msgpack.unpackb(fields[b"events"], raw=True)
    if all(events):
        return range(len(events)), fields
    kept = [i for i, event in enumerate(events) if event]
    left = {**fields, b"events": codec.pack_log_events([events[i] for i in kept])}
    if b"source" in fields:  # blanked at the same places (erase_deliveries.lua)
        sources = msgpack.unpackb(fields[b"source"], raw=True)
        left[b"source"] = codec.pack_log_events([sources[i] for i in kept])
    return kept, left


def source_data(batch: codec.LoggedBatch) -> list[str | None]:
    """Each event's data as published where a transform changed what was sent, as JSON;
    None where it was sent as published."""
    if not batch.sources:
        return [None] * len(batch.events)
    found: list[str | None] = []
    for sent, queued in zip(batch.entries, batch.sources, strict=True):
        if sent == queued:
            found.append(None)
        else:
            data = codec.unpack_entry(queued).data
            found.append(None if data is None else _JSON.encode(data))
    return found


def to_record_batch(partition: int, entries: Iterable[Entry]) -> pa.RecordBatch:
    """Stream entries (as XRANGE returns them) exploded into one row per event."""
    columns: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    names = ("id", "topic", "type", "url", "t", "data", "position", "traceparent", "tracestate",
             "key", "schema_version", "source_data")  # fmt: skip
    id_, topic, type_, url, t, data, position, parent, state, key, schema, source = (
        columns[n] for n in names
    )
    for raw_id, fields in entries:
        kept, fields = _kept(fields)
        batch = codec.unpack_log_entry(fields)
        position.extend(kept)
        for entry, event in zip(batch.entries, batch.events, strict=True):
            id_.append(event_ids.of_entry(entry, event))
            topic.append(event.topic)
            type_.append(event.type)
            url.append(event.url)
            t.append(event.t)
            data.append(None if event.data is None else _JSON.encode(event.data))
            parent.append(event.traceparent)
            state.append(event.tracestate)
            key.append(event.key)
            schema.append(event.schema)
        source.extend(source_data(batch))
        count = len(batch.events)
        values = (
            batch.subscriber,
            batch.priority,
            batch.batch_id,
            batch.attempts,
            batch.created_at * 1000,  # Arrow timestamps of this schema are microseconds
            batch.first_attempt_at * 1000,
            batch.delivered_at * 1000,
            partition,
            raw_id.decode(),
        )
        for name, value in zip(PER_BATCH, values, strict=True):
            columns[name].extend([value] * count)
    arrays = [pa.array(columns[f.name], type=f.type) for f in ARROW_SCHEMA]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
