"""End to end with one SparkSession (local[2]): the delivery log into the Parquet lake,
resuming from checkpoints, where streams start, trimming, and the batch reader."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.errors import StreamingQueryException

from spark.ingest import ingest
from spark.lake import events as lake_events
from spec.spark.logdata import BASE_MS, DAY_MS, LogWriter, log_key

pytestmark = pytest.mark.jvm

COLUMNS = ["id", "subscriber", "topic", "type", "url", "t", "data", "priority", "batch_id"]


@pytest.fixture
def log(redis_client):
    return LogWriter(redis_client)


@pytest.fixture
def lake(tmp_path, redis_url, spark):
    """ingest() into tmp_path with the test session; returns (run, rows)."""

    def run(**kwargs):
        return ingest(tmp_path / "lake", tmp_path / "checkpoint", redis_url, spark=spark, **kwargs)

    def rows():
        return [r.asDict() for r in lake_events(spark, tmp_path / "lake").collect()]

    return run, rows


def expected(written):
    return sorted(
        (
            {
                **{k: w[k] for k in COLUMNS},
                "data": None if w["data"] is None else json.dumps(w["data"], separators=(",", ":")),
                "stream_partition": w["partition"],
                "stream_id": w["stream_id"],
            }
            for w in written
        ),
        key=lambda r: (r["stream_id"], r["url"]),
    )


def actual(rows):
    keep = [*COLUMNS, "stream_partition", "stream_id"]
    return sorted(({k: r[k] for k in keep} for r in rows), key=lambda r: (r["stream_id"], r["url"]))


def test_lake_holds_exactly_the_delivered_events(lake, log):
    run, rows = lake
    ids = [
        log.batch(i % 4, events=3, priority=i % 3 * 5, delivered_at=BASE_MS + i % 2 * DAY_MS)
        for i in range(8)
    ]
    log.erase(1, ids[5], blank={1})  # an erasure took one of its events (spark/erased.py)
    result = run(fail_on_data_loss=True)
    found = rows()
    assert (result.rows, len(found)) == (23, 23)
    assert actual(found) == expected(log.written)
    kept = [r["position"] for r in found if (r["stream_partition"], r["stream_id"]) == (1, ids[5])]
    assert sorted(kept) == [0, 2]
    assert {str(r["date"]) for r in found} == {"2026-01-01", "2026-01-02"}
    one = next(r for r in found if r["batch_id"] == 2)
    assert one["delivered_at"].isoformat() == "2026-01-02T00:00:00"  # session time zone UTC
    assert (one["attempts"], one["created_at"].isoformat()) == (1, "2026-01-01T23:59:59.500000")


def test_resume_reads_only_new_entries_and_rerun_adds_nothing(lake, log):
    run, rows = lake
    log.fill(6)
    assert run().rows == 12
    log.fill(3)
    assert run().rows == 6
    assert run().rows == 0
    assert actual(rows()) == expected(log.written)  # no duplicates, nothing missing


def test_partitions_are_read_in_parallel(lake, log, spark, redis_url, tmp_path):
    run, _ = lake
    log.fill(8)  # two entries in each of the four streams, all on one date
    assert run().batches == 1
    files = list((tmp_path / "lake" / "events").glob("date=*/*.parquet"))
    assert len(files) == 1  # collected to the driver, one file per date and micro-batch
    frame = spark.read.format("busbar").option("redis.url", redis_url).load()
    assert frame.rdd.getNumPartitions() == 4


def stream_rows(spark, redis_url, tmp_path: Path, **options):
    """An availableNow query with the given source options into Parquet; all rows so far."""
    reader = spark.readStream.format("busbar").option("redis.url", redis_url)
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if not (tmp_path / "out" / "_spark_metadata").exists():
        return []
    return spark.read.parquet(str(tmp_path / "out")).collect()


def test_starting_offsets_latest_then_checkpoint(spark, redis_url, log, tmp_path):
    log.fill(4)
    assert stream_rows(spark, redis_url, tmp_path, startingOffsets="latest") == []
    newer = log.batch(3)
    found = stream_rows(spark, redis_url, tmp_path, startingOffsets="latest")
    assert {r["stream_id"] for r in found} == {newer}


def test_starting_offsets_per_partition_json(spark, redis_url, log, tmp_path):
    ids = log.fill(8)  # partitions 0,1,2,3,0,1,2,3
    start = json.dumps({"0": ids[4], "2": ids[2]})
    found = stream_rows(spark, redis_url, tmp_path, startingOffsets=start)
    assert {r["stream_id"] for r in found} == {ids[1], ids[3], ids[5], ids[6], ids[7]}


def test_trimmed_below_checkpoint_continues_or_fails(lake, log, redis_client):
    run, rows = lake
    log.fill(4)
    run()
    new = [log.batch(0) for _ in range(5)]
    redis_client.xtrim(log_key(0), maxlen=2, approximate=False)
    with pytest.raises(StreamingQueryException, match=r"3 entries after .* were trimmed"):
        run(fail_on_data_loss=True)
    assert run().rows == 4  # the two entries left, two events each
    assert {r["stream_id"] for r in rows()} >= set(new[-2:])
    assert not {r["stream_id"] for r in rows()} & set(new[:3])


def test_checkpoint_ahead_of_the_stream_fails(lake, log, redis_client):
    run, _ = lake
    log.fill(4)
    run()
    redis_client.flushdb()
    log.batch(0)
    with pytest.raises(StreamingQueryException, match="checkpoint is ahead of the stream"):
        run()


def test_interval_trigger_runs_until_stopped_with_a_cap(lake, log, spark):
    run, rows = lake
    log.fill(10)
    done: dict = {}
    kwargs = {"interval_seconds": 0.5, "max_batches_per_trigger": 4, "timeout_seconds": 100}
    worker = threading.Thread(target=lambda: done.update(result=run(**kwargs)))
    worker.start()
    deadline = time.monotonic() + 100
    while time.monotonic() < deadline and worker.is_alive():
        query = next((q for q in spark.streams.active if q.name == "busbar_ingest"), None)
        if query and sum(p.numInputRows for p in query.recentProgress) >= 20:
            query.stop()  # what Ctrl-C does to `busbar spark ingest --interval`
        time.sleep(0.2)
    worker.join(30)
    assert (done["result"].rows, done["result"].batches) == (20, 3)  # 4 + 4 + 2 log entries
    assert len(rows()) == 20


def test_batch_read_between_offsets(spark, redis_url, log):
    ids = log.fill(8)
    frame = (
        spark.read.format("busbar")
        .option("redis.url", redis_url)
        .option("startingOffsets", json.dumps({"1": ids[1]}))
        .option("endingOffsets", json.dumps({"0": ids[0], "1": ids[5], "2": ids[2], "3": ids[3]}))
        .load()
    )
    assert {r["stream_id"] for r in frame.collect()} == {ids[0], ids[5], ids[2], ids[3]}
    assert frame.count() == 8


def test_cap_applies_to_available_now_too(lake, log):
    run, _ = lake
    log.fill(6)
    result = run(max_batches_per_trigger=4)
    assert (result.rows, result.batches) == (12, 2)


def test_one_progress_line_per_micro_batch_with_rows_and_lag(lake, log):
    run, _ = lake
    log.fill(12)  # 12 log entries over 4 partitions, 2 events each
    lines: list[str] = []
    result = run(max_batches_per_trigger=8, on_progress=lines.append)
    assert (result.rows, result.batches) == (24, 2)
    events = [line for line in lines if not line.startswith("attempts ")]
    assert len(events) == 2, lines
    assert events[0].startswith("batch 0: 16 rows in ")
    assert ", lag 4 entries, oldest " in events[0]
    assert events[1].startswith("batch 1: 8 rows in ") and events[1].endswith(" s, lag 0 entries")
    # the attempts table's query (no attempts here) says which table its lines are of
    tried = [line for line in lines if line.startswith("attempts ")]
    assert tried and all(line.startswith("attempts batch ") for line in tried)
    assert tried[-1].endswith(" s, lag 0 entries")


def test_rows_from_before_event_ids_get_a_stable_id_from_their_content(lake, log, spark, tmp_path):
    run, _ = lake
    log.fill(2)
    run()  # rows with ids, by ingest
    old = [  # a lake begun before the id column: the same event twice, and one more
        {"subscriber": s, "topic": "widgets", "type": "update", "url": f"https://x.test/{n}",
         "t": 7, "data": None if n else '{"a":1}', "date": "2025-12-31"}
        for s, n in (("a", 0), ("b", 0), ("a", 1))
    ]  # fmt: skip
    # files of both schemas in one Delta table: the ingest's, and one without the later
    # columns (a lake migrated from before them: spark/migrate.py)
    mixed = str(tmp_path / "mixed" / "events")
    current = lake_events(spark, tmp_path / "lake")
    write_deltalake(mixed, current.toArrow(), partition_by=["date"])
    older = pa.Table.from_pylist(old).cast(
        pa.schema([(k, pa.date32() if k == "date" else pa.string() if k != "t" else pa.int64())
                   for k in old[0]]))  # fmt: skip
    write_deltalake(mixed, older, mode="append", partition_by=["date"], schema_mode="merge")

    def read() -> dict:
        found = lake_events(spark, tmp_path / "mixed").collect()
        return {(r["subscriber"], r["url"]): r["id"] for r in found}

    ids = read()
    assert {ids[(w["subscriber"], w["url"])] for w in log.written} == {w["id"] for w in log.written}
    first, again, other = (
        ids[(s, f"https://x.test/{n}")] for s, n in (("a", 0), ("b", 0), ("a", 1))
    )
    assert first == again != other
    assert first.startswith("lake_") and len(first) == 37
    assert read() == ids  # the same on every read
