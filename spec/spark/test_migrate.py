"""`busbar spark migrate` on a lake the previous release wrote: Spark's streaming file
sink, Parquet with `_spark_metadata` (the writer kept here as a fixture only). Migrated,
it reads the same rows; the next ingest from the same checkpoint adds only what is new,
also when the checkpoint had not recorded the sink's last batch (the crash case); a
second migration changes nothing; an ingest on the old layout says to migrate."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from spark.errors import LakeLayoutError
from spark.ingest import checkpoint_of, ingest, table_frame
from spark.lake import events as lake_events
from spark.migrate import MIGRATED, migrate
from spark.tables import TABLES
from spec.spark.logdata import LogWriter

pytestmark = pytest.mark.jvm


def old_ingest(spark, redis_url: str, lake: Path, checkpoint: Path) -> None:
    """What `busbar spark ingest` did before the Delta lake: the file sink, per table."""
    for table in TABLES.values():
        frame = table_frame(spark, table, redis_url, "busbar:", 4, {})
        query = (
            frame.writeStream.format("parquet")
            .option("path", str(lake / table.name))
            .option("checkpointLocation", checkpoint_of(checkpoint, table))
            .partitionBy("date")
            .outputMode("append")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()


def stream_ids(spark, lake: Path) -> list[tuple[int, str, int]]:
    found = lake_events(spark, lake).select("stream_partition", "stream_id", "position")
    return sorted(tuple(r) for r in found.collect())


def test_a_parquet_lake_migrated_resumes_without_duplicates(spark, redis_url, redis_client,
                                                             tmp_path: Path) -> None:  # fmt: skip
    log = LogWriter(redis_client)
    lake, checkpoint = tmp_path / "lake", tmp_path / "checkpoint"
    log.fill(4)
    old_ingest(spark, redis_url, lake, checkpoint)
    log.fill(4)
    old_ingest(spark, redis_url, lake, checkpoint)  # two batches: 0 and 1
    (lake / "events" / "date=2026-01-01" / "part-stray.parquet").write_bytes(b"not listed")
    before = sorted(
        tuple(r) for r in spark.read.parquet(str(lake / "events"))
        .select("stream_partition", "stream_id", "position").collect()
    )  # fmt: skip
    assert len(before) == 16
    with pytest.raises(LakeLayoutError, match="run busbar spark migrate --output"):
        ingest(lake, checkpoint, redis_url, spark=spark)
    # the crash case: the sink committed batch 1, the checkpoint did not record it
    (checkpoint / "commits" / "1").unlink()
    (checkpoint / "commits" / ".1.crc").unlink(missing_ok=True)

    said = migrate(lake, checkpoint)
    assert said["events"].endswith("files, to batch 1")
    assert (lake / "events" / MIGRATED).is_dir()
    assert not (lake / "events" / "_spark_metadata").exists()
    assert stream_ids(spark, lake) == before  # the stray file is not part of the table
    assert migrate(lake, checkpoint) == {"events": "already Delta", "attempts": "already Delta"}

    assert ingest(lake, checkpoint, redis_url, spark=spark).rows == 0  # batch 1 again: skipped
    log.fill(2)
    assert ingest(lake, checkpoint, redis_url, spark=spark).rows == 4
    assert len(stream_ids(spark, lake)) == 20 == len(set(stream_ids(spark, lake)))
    shutil.rmtree(checkpoint)  # a new checkpoint is another application: reads it all again
    assert ingest(lake, checkpoint, redis_url, spark=spark).rows == 20
