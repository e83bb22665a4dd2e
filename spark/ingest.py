"""`busbar spark ingest`: the shards' streams into a Delta lake (spark/delta.py), exactly
once per checkpoint, one table per stream kind (spark/tables.py): `events` from the
delivery log, `attempts` from the attempt stream.

A streaming query per table from the `busbar` source, each micro-batch handed to
foreachBatch: collected to the driver as Arrow and appended with delta-rs, its batch id
recorded in the same commit (an application transaction per table and checkpoint), so
a batch run again after a crash between that commit and Spark's checkpoint adds nothing.
Collecting to the driver was chosen by measurement (docs/lake.md): a micro-batch is
bounded by what the streams hold and by `maxBatchesPerTrigger`. Each table has its own
checkpoint (events: the checkpoint directory itself, as before the attempts table
existed, so a lake begun then resumes where it was; attempts: its `attempts`
subdirectory), so either table is rebuilt or resumed on its own. With `available_now`
it reads what the streams hold now, in micro-batches, and returns; with an interval it
runs until stopped. A Keeper (spark/keeper.py), when given, registers the lake and
carries out the erasures due, between micro-batches.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from app.models.keys import Keys
from spark import delta
from spark.errors import LakeLayoutError
from spark.keeper import Keeper
from spark.progress import Printer, ProgressLines
from spark.session import get_session, register
from spark.tables import ATTEMPTS, EVENTS, TABLES, Table
from spark.watch import Stop, watch

log = logging.getLogger(__name__)

DAY_MS = 86_400_000
ALL = (EVENTS.name, ATTEMPTS.name)


def keys(key_prefix: str, partitions: int, table: Table = EVENTS) -> list[str]:
    return [table.stream(Keys(key_prefix, partitions).shard(p)) for p in range(partitions)]


def under(base: str | Path, name: str) -> str:
    """`base/name` for a local path or a URL alike (Path would make s3a:// into s3a:/)."""
    return f"{str(base).rstrip('/')}/{name}"


def checkpoint_of(checkpoint_dir: str | Path, table: Table) -> str:
    """Where a table's offsets live (see the module docstring)."""
    return str(checkpoint_dir) if table is EVENTS else under(checkpoint_dir, table.name)


@dataclass(frozen=True)
class TableResult:
    """What one table's query did, from its progress reports (batches: those with rows)."""

    table: str
    batches: int
    rows: int
    path: str


@dataclass(frozen=True)
class IngestResult:
    """What one run did; `batches`, `rows` and `path` are the events table's."""

    tables: dict[str, TableResult]
    seconds: float

    @property
    def batches(self) -> int:
        return self.tables[EVENTS.name].batches if EVENTS.name in self.tables else 0

    @property
    def rows(self) -> int:
        return self.tables[EVENTS.name].rows if EVENTS.name in self.tables else 0

    @property
    def path(self) -> str:
        return self.tables[EVENTS.name].path if EVENTS.name in self.tables else ""


def delivery_date(column: str = "delivered_at") -> Column:
    """The UTC date of a timestamp, whatever the session time zone (days since the epoch)."""
    days = F.floor(F.unix_millis(F.col(column)) / DAY_MS).cast("int")
    return F.date_from_unix_date(days)


def table_frame(
    spark: SparkSession,
    table: Table,
    redis_url: str,
    key_prefix: str,
    partitions: int,
    extra: dict[str, str],
) -> DataFrame:
    """`extra`: more source options (`redis.cluster`, `failOnDataLoss`, ...)."""
    reader = (
        spark.readStream.format("busbar")
        .option("table", table.name)
        .option("redis.url", redis_url)
        .option("keyPrefix", key_prefix)
        .option("partitions", str(partitions))
    )
    for key, value in extra.items():
        reader = reader.option(key, value)
    return reader.load().withColumn("date", delivery_date(table.time_column))


class BatchWriter:
    """foreachBatch's function for one table: the micro-batch as Arrow on the driver,
    committed once (spark/delta.py), under the keeper's lock when there is one."""

    def __init__(self, table: Table, path: str, keeper: Keeper | None) -> None:
        self.table, self.path, self.keeper = table, path, keeper
        self.app = ""
        self.started = threading.Event()

    def start(self, query: StreamingQuery) -> StreamingQuery:
        """The query's id names its checkpoint (delta.app_id): known once it started."""
        self.app = delta.app_id(self.table, str(query.id))
        self.started.set()
        return query

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        self.started.wait()
        done = delta.committed(self.path, self.app)
        if done is not None and done >= batch_id:
            return  # committed before a crash, not checkpointed: nothing to read again
        if self.keeper is not None:
            self.keeper.begin(self.table.name)
        try:
            data = frame.toArrow()
            if data.num_rows == 0:
                return
            if self.keeper is None:
                delta.commit_batch(self.path, self.table, data, self.app, batch_id)
                return
            with self.keeper.lock:
                delta.commit_batch(self.path, self.table, data, self.app, batch_id)
        finally:
            if self.keeper is not None:
                self.keeper.end(self.table.name)


def writer(
    frame: DataFrame,
    table: Table,
    path: str,
    checkpoint: str,
    interval_seconds: float | None,
    keeper: Keeper | None = None,
) -> tuple[DataStreamWriter, BatchWriter]:
    """The table's Delta writer: an interval's processing-time trigger, else availableNow;
    and its foreachBatch function, whose start() takes the query once started."""
    name = "busbar_ingest" if table is EVENTS else f"busbar_ingest_{table.name}"
    delta.ensure(path, table)
    batches = BatchWriter(table, path, keeper)
    out = (
        frame.writeStream.foreachBatch(batches)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .queryName(name)
    )  # fmt: skip
    if interval_seconds is not None:
        return out.trigger(processingTime=f"{interval_seconds} seconds"), batches
    return out.trigger(availableNow=True), batches


def prepare(output_dir: str | Path, keeper: Keeper | None) -> Callable[..., None] | None:
    """Both tables made (an erasure finds the other one too), the keeper's first tick;
    the keeper's tick for between micro-batches."""
    for table in TABLES.values():
        delta.ensure(under(output_dir, table.name), table)
    if keeper is None:
        return None
    keeper.tick(force=True)
    return keeper.tick


def check_layout(output_dir: str | Path, checkpoint_dir: str | Path) -> None:
    """LakeLayoutError, saying what to run, for a lake of the Parquet layout."""
    for table in TABLES.values():
        path = under(output_dir, table.name)
        if delta.is_old_layout(path):
            raise LakeLayoutError(
                f"{path} is a lake of the Parquet layout: run busbar spark migrate "
                f"--output {output_dir} --checkpoint {checkpoint_dir}"
            )


def result_of(
    table: Table, query: StreamingQuery, lines: ProgressLines | None, path: str
) -> TableResult:
    """Once the query has ended: its last progress lines, and what it did."""
    query.awaitTermination()  # re-raises a failure of the query
    progress = query.recentProgress
    if lines:
        lines.report(progress)
    return TableResult(
        table=table.name,
        batches=sum(1 for p in progress if p.numInputRows > 0),
        rows=sum(p.numInputRows for p in progress),
        path=path,
    )


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
    tables: Sequence[str] = ALL,
    keeper: Keeper | None = None,
) -> IngestResult:
    """Run one query per table of `tables`, at once; `interval_seconds` (a processing-time
    trigger) wins over `available_now`. An interval run goes until `stop` says so, a
    query ends, or `timeout_seconds`; `on_progress` gets one line per micro-batch
    (spark/progress.py), an attempts line starting `attempts `. A `keeper` registers the
    lake and erases what is due at the start, between micro-batches and at the end."""
    if interval_seconds is None and not available_now:
        raise ValueError("ingest needs available_now=True or interval_seconds")
    chosen = [TABLES[name] for name in ALL if name in tables]
    if not chosen or set(tables) - set(ALL):
        raise ValueError(f"ingest tables must be among {', '.join(ALL)}: {list(tables)}")
    paths = {t.name: under(output_dir, t.name) for t in chosen}
    check_layout(output_dir, checkpoint_dir)
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
    started = time.monotonic()
    tick = prepare(output_dir, keeper)
    watched = []
    for table in chosen:
        frame = table_frame(spark, table, redis_url, key_prefix, partitions, extra)
        checkpoint = checkpoint_of(checkpoint_dir, table)
        out, batches = writer(frame, table, paths[table.name], checkpoint, interval_seconds, keeper)
        lines = None
        if on_progress is not None:
            prefix = "" if table is EVENTS else f"{table.name} "
            streams = keys(key_prefix, partitions, table)
            lines = ProgressLines(redis_url, streams, on_progress, cluster, prefix)
        watched.append((batches.start(out.start()), lines))
    deadline = None if timeout_seconds is None else started + timeout_seconds
    try:
        watch(spark, watched, interval_seconds is None, deadline, stop, on_progress, tick)
    except KeyboardInterrupt:
        log.info("interrupted: stopping the ingest queries")
    finally:
        for query, _ in watched:
            if query.isActive:
                query.stop()
    if tick is not None:
        tick(True)  # what came due while the last micro-batches ran
    results = {
        table.name: result_of(table, query, lines, paths[table.name])
        for table, (query, lines) in zip(chosen, watched, strict=True)
    }
    return IngestResult(results, seconds=round(time.monotonic() - started, 3))
