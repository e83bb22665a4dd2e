"""`busbar spark ingest`: the delivery log into a Parquet lake, exactly once per checkpoint.

A streaming query from the `busbar` source to Spark's file sink: the sink records each
committed micro-batch in `<output>/events/_spark_metadata` and the source's offsets live
in the checkpoint, so a rerun (or a crash and restart) never writes an event twice as
seen by Spark readers of the directory. With `available_now` it reads what the log holds
now, in micro-batches, and returns; with an interval it runs until stopped.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from app.models.keys import Keys
from spark.progress import Printer, ProgressLines
from spark.session import get_session, register

log = logging.getLogger(__name__)

DAY_MS = 86_400_000
POLL_S = 0.5


class Stop(Protocol):
    """A stop asked for from outside (signals, in the CLI): once, after the micro-batch in
    progress; urgently, now."""

    @property
    def requested(self) -> bool: ...

    @property
    def urgent(self) -> bool: ...


def stopping(spark: SparkSession, query: StreamingQuery, stop: Stop) -> bool:
    """Whether to stop the query now. A batch stopped half-way makes Spark log a page of
    Java InterruptedException, so a plain request waits for the batch in progress; an
    urgent one stops at once. Either way Spark's warnings about the jobs it cancels are
    expected then, and turned off."""
    if stop.urgent:
        spark.sparkContext.setLogLevel("OFF")
        return True
    if query.status["isTriggerActive"]:
        return False
    spark.sparkContext.setLogLevel("ERROR")
    return True


def watch(
    spark: SparkSession,
    query: StreamingQuery,
    lines: ProgressLines | None,
    deadline: float | None,
    stop: Stop | None,
    on_progress: Printer | None,
) -> None:
    """Wait for the query in short waits rather than one long one: a stop request (a
    signal recorded by the caller) is seen within POLL_S, and no py4j call is ever
    interrupted half-way. Returns when the query ends, the deadline passes or it is
    time to stop; the caller stops the query."""
    told = False
    # PySpark types the timeout as int; it takes seconds with a fraction (x 1000)
    while not query.awaitTermination(cast(int, POLL_S)):
        if lines:
            lines.report(query.recentProgress)
        if deadline and time.monotonic() > deadline:
            return
        if stop and stop.requested:
            if not told and on_progress:
                on_progress("stopping after the micro-batch in progress (again: stop now)")
            told = True
            if stopping(spark, query, stop):
                return


def keys(key_prefix: str, partitions: int) -> list[str]:
    return [Keys(key_prefix, partitions).shard(p).delivery_log for p in range(partitions)]


@dataclass(frozen=True)
class IngestResult:
    """What one run did, from the query's progress reports (batches: those with rows)."""

    batches: int
    rows: int
    seconds: float
    path: str


def delivery_date(column: str = "delivered_at") -> Column:
    """The UTC date of a timestamp, whatever the session time zone (days since the epoch)."""
    days = F.floor(F.unix_millis(F.col(column)) / DAY_MS).cast("int")
    return F.date_from_unix_date(days)


def events_frame(
    spark: SparkSession, redis_url: str, key_prefix: str, partitions: int, extra: dict[str, str]
) -> DataFrame:
    """`extra`: more source options (`redis.cluster`, `failOnDataLoss`, ...)."""
    reader = (
        spark.readStream.format("busbar")
        .option("redis.url", redis_url)
        .option("keyPrefix", key_prefix)
        .option("partitions", str(partitions))
    )
    for key, value in extra.items():
        reader = reader.option(key, value)
    return reader.load().withColumn("date", delivery_date())


def ingest(
    output_dir: str | Path,
    checkpoint_dir: str | Path,
    redis_url: str,
    key_prefix: str = "busbar:",
    partitions: int = 4,
    cluster: bool = False,
    available_now: bool = True,
    interval_seconds: float | None = None,
    master: str | None = None,
    spark: SparkSession | None = None,
    fail_on_data_loss: bool = False,
    max_batches_per_trigger: int | None = None,
    timeout_seconds: int | None = None,
    on_progress: Printer | None = None,
    stop: Stop | None = None,
) -> IngestResult:
    """Run the ingest query; `interval_seconds` (a processing-time trigger) wins over
    `available_now`. An interval query runs until `stop()` says so, or `timeout_seconds`;
    `on_progress` gets one line per micro-batch (spark/progress.py)."""
    if interval_seconds is None and not available_now:
        raise ValueError("ingest needs available_now=True or interval_seconds")
    if spark is None:
        spark = get_session(master, app_name="busbar-ingest")
    else:
        register(spark)
    # the result sums every progress report; Spark keeps only the last 100 by default
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    extra = {
        "failOnDataLoss": str(fail_on_data_loss).lower(),
        "redis.cluster": str(cluster).lower(),
    }
    if max_batches_per_trigger:
        extra["maxBatchesPerTrigger"] = str(max_batches_per_trigger)
    path = str(Path(output_dir) / "events")
    writer = (
        events_frame(spark, redis_url, key_prefix, partitions, extra)
        .writeStream.format("parquet")
        .option("path", path)
        .option("checkpointLocation", str(checkpoint_dir))
        .partitionBy("date")
        .outputMode("append")
        .queryName("busbar_ingest")
    )
    if interval_seconds is not None:
        writer = writer.trigger(processingTime=f"{interval_seconds} seconds")
    else:
        writer = writer.trigger(availableNow=True)
    started = time.monotonic()
    query = writer.start()
    lines = None
    if on_progress is not None:
        lines = ProgressLines(redis_url, keys(key_prefix, partitions), on_progress, cluster)
    deadline = None if timeout_seconds is None else started + timeout_seconds
    try:
        watch(spark, query, lines, deadline, stop, on_progress)
    except KeyboardInterrupt:
        log.info("interrupted: stopping the ingest query")
    finally:
        if query.isActive:
            query.stop()
    query.awaitTermination()  # re-raises a failure of the query
    progress = query.recentProgress
    if lines:
        lines.report(progress)
    return IngestResult(
        batches=sum(1 for p in progress if p.numInputRows > 0),
        rows=sum(p.numInputRows for p in progress),
        seconds=round(time.monotonic() - started, 3),
        path=path,
    )
