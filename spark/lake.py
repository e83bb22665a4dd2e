"""Reading the lake back: its events, every row with an event id; its attempts.

Each table is a Delta table (spark/delta.py) read by plain Spark: the files its log
says are current, as Parquet (`basePath` gives back the `date` partition), so no Delta
jar is needed and the files a delete dropped are never read, vacuumed or not.

Files written before a column was added (`id`, the trace context, the ordering `key`)
are read with it null: the files of a lake are read together, whatever their schema.

Rows written by `busbar spark ingest` carry the id their subscriber received with
`event_ids` (spark/rows.py). A lake begun before that column existed holds rows without
one; they get an id derived from their content here, on every read the same. It has its
own form, `lake_` and 32 hex digits, because the id a subscriber would have received
hashes the event's bytes as queued, which the lake does not keep: two deliveries of the
same event still share it, and it is never mistaken for a delivered id.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spark import delta
from spark.tables import TABLES

EVENTS = "events"  # the tables under the ingest's --output
ATTEMPTS = "attempts"
CONTENT_ID = "lake_"


def content_id() -> Column:
    """The id of a row written without one: its event's content, hashed."""
    content = F.concat_ws(
        "\n", F.lit("busbar lake event"), "topic", "type", "url", F.col("t").cast("string"),
        F.coalesce(F.col("data"), F.lit("")),
    )  # fmt: skip
    return F.concat(F.lit(CONTENT_ID), F.substring(F.sha2(content, 256), 1, 32))


def events(spark: SparkSession, lake: str | Path) -> DataFrame:
    """The lake's events table (`lake` is the ingest's --output), files of either
    schema read together, with an id on every row."""
    frame = table(spark, lake, EVENTS)
    later = {"id": "string", "traceparent": "string", "tracestate": "string", "key": "string",
             "schema_version": "int", "source_data": "string"}  # fmt: skip
    for column, kind in later.items():  # columns older lakes lack
        if column not in frame.columns:
            frame = frame.withColumn(column, F.lit(None).cast(kind))
    return frame.withColumn("id", F.coalesce(F.col("id"), content_id()))


def attempts(spark: SparkSession, lake: str | Path) -> DataFrame:
    """The lake's attempts table (spark/attempt_rows.py): one row per delivery attempt."""
    return table(spark, lake, ATTEMPTS)


def table(spark: SparkSession, lake: str | Path, name: str) -> DataFrame:
    """One table's current files, every file's columns (mergeSchema); an empty table is
    an empty frame of the table's columns."""
    path = f"{str(lake).rstrip('/')}/{name}"
    files = delta.current_files(path)
    if not files:
        return spark.createDataFrame([], delta.spark_schema(TABLES[name]))
    reader = spark.read.option("mergeSchema", "true").option("basePath", path)
    return reader.parquet(*files)
