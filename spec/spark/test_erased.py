"""What an erasure took out of the streams, without a JVM: the readers take the `:erased`
companion as the entries it stands for (spark/erased.py), so an erased event never
reaches the lake, the others of its batch keep their places, and no erasure is ever
counted as entries trimmed, in planning (positions, loss checks, caps) or in reading."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis
from pyspark.sql.streaming.datasource import ReadMaxRows

from app.models.keys import Keys
from spark import offsets, ranges
from spark.errors import DataLossError
from spark.offsets import Position
from spark.options import SourceOptions
from spec.spark.logdata import LogWriter, erase, log_key
from spec.spark.test_offsets import drain, stream_reader


@pytest.fixture
def log(redis_client):
    return LogWriter(redis_client)


def read_all(
    client: redis.Redis, options: SourceOptions, start: Any = "earliest"
) -> list[dict[str, Any]]:
    """Every row between `start` and the streams' ends, read as the batch reader does."""
    infos = offsets.stream_infos(client, options.keys())
    begin = ranges.resolve(client, options, start, infos)
    end = ranges.resolve(client, options, "latest", infos)
    parts = ranges.plan(options, begin, end)
    return [row for p in parts for b in ranges.read_range(options, p) for row in b.to_pylist()]


def placed(rows: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    return [(r["stream_id"], r["position"], r["url"]) for r in rows]


@pytest.mark.parametrize("chunk", [1000, 2])  # 2: erased entries on both sides of chunks
def test_a_range_reads_what_erasure_left_in_place(
    redis_url, redis_client, log, caplog, monkeypatch, chunk
):
    monkeypatch.setattr(ranges, "CHUNK", chunk)
    ids = [log.batch(0, events=3) for _ in range(7)]
    log.erase(0, ids[0])  # the first entry: the stream now starts later
    log.erase(0, ids[2])
    log.erase(0, ids[3], blank={1})  # one event of three: the others keep positions 0 and 2
    log.erase(0, ids[5], blank={0, 2})  # after the stream's last entry left
    log.erase(0, ids[6])  # the last entry: the stream's last id is no entry of it any more
    options = SourceOptions(redis_url, fail_on_data_loss=True)
    with caplog.at_level(logging.WARNING):
        rows = read_all(redis_client, options)
    assert placed(rows) == [(w["stream_id"], w["position"], w["url"]) for w in log.written]
    assert [(r[0], r[1]) for r in placed(rows)] == [
        (ids[1], 0), (ids[1], 1), (ids[1], 2), (ids[3], 0), (ids[3], 2),
        (ids[4], 0), (ids[4], 1), (ids[4], 2), (ids[5], 1),
    ]  # fmt: skip
    assert [r["id"] for r in rows] == [w["id"] for w in log.written]  # the same event ids
    assert "trimmed" not in caplog.text
    # a position named by the user, before the erased first entry: counted, not a loss
    named = {0: offsets.predecessor(ids[0])}
    assert placed(read_all(redis_client, options, named)) == placed(rows)


def test_a_stream_read_from_a_checkpoint_across_erasures(redis_url, log, caplog):
    ids = [log.batch(0) for _ in range(2)]
    reader = stream_reader(redis_url, failOnDataLoss="true")
    checkpoint, _ = drain(reader, reader.initialOffset())
    ids += [log.batch(0) for _ in range(4)]
    for gone in ids[:3]:  # everything up to the checkpoint and the entry after it
        log.erase(0, gone)
    log.erase(0, ids[4], blank={0})
    resumed = stream_reader(redis_url, failOnDataLoss="true")
    with caplog.at_level(logging.WARNING):
        end, batches = drain(resumed, checkpoint)
    assert batches == [[ids[3], ids[4], ids[5]]]
    assert end["0"] == {"id": ids[5], "n": 6}
    assert "trimmed" not in caplog.text


def test_trimmed_counts_no_erased_entry(redis_url, redis_client, log, caplog):
    ids = [log.batch(0) for _ in range(6)]
    reader = stream_reader(redis_url)
    checkpoint, _ = drain(reader, reader.initialOffset())
    log.erase(0, ids[1])  # erased once read: before the checkpoint
    log.erase(0, ids[3], blank={0})
    (info,) = offsets.stream_infos(redis_client, [log_key(0)])
    assert (info.added, info.length, info.erased, info.trimmed) == (6, 4, 2, 0)
    newer = [log.batch(0) for _ in range(4)]
    redis_client.xtrim(log_key(0), maxlen=2, approximate=False)  # 0 2 4 5 and 2 newer go
    (info,) = offsets.stream_infos(redis_client, [log_key(0)])
    assert info.trimmed == 6
    with caplog.at_level(logging.WARNING):
        _, batches = drain(stream_reader(redis_url), checkpoint)
    assert batches == [newer[2:]]
    assert f"partition 0: 2 entries after {ids[5]} were trimmed" in caplog.text
    with pytest.raises(DataLossError, match="2 entries after"):
        drain(stream_reader(redis_url, failOnDataLoss="true"), checkpoint)


def test_erased_ids_dropped_before_the_first_entry_change_nothing(redis_url, redis_client, log):
    ids = [log.batch(0) for _ in range(3)]
    log.erase(0, ids[0])
    redis_client.hdel(log_key(0) + ":erased", ids[0])  # a later erasure drops it: n stays
    (info,) = offsets.stream_infos(redis_client, [log_key(0)])
    assert (info.trimmed, offsets.earliest(info)) == (0, Position(offsets.predecessor(ids[1]), 1))
    options = SourceOptions(redis_url, fail_on_data_loss=True)
    assert {r["stream_id"] for r in read_all(redis_client, options)} == set(ids[1:])


def test_entries_rewritten_before_the_first_one_are_read(redis_url, redis_client, log, caplog):
    """An erasure that took an event out of the oldest entries leaves them in the
    companion only, before the stream's first entry, or all of them: a new ingest
    (earliest) reads them there."""
    ids = [log.batch(0, events=2) for _ in range(3)]
    log.erase(0, ids[0], blank={0})
    log.erase(0, ids[1], blank={1})
    (info,) = offsets.stream_infos(redis_client, [log_key(0)])
    assert offsets.earliest(info) == Position(offsets.predecessor(ids[0]), 0)
    options = SourceOptions(redis_url, fail_on_data_loss=True)
    assert [r[:2] for r in placed(read_all(redis_client, options))] == [
        (ids[0], 1), (ids[1], 0), (ids[2], 0), (ids[2], 1),
    ]  # fmt: skip
    log.erase(0, ids[2], blank={0})  # the stream is empty now
    with caplog.at_level(logging.WARNING):
        rows = read_all(redis_client, options)
    assert [r[:2] for r in placed(rows)] == [(ids[0], 1), (ids[1], 0), (ids[2], 1)]
    assert "trimmed" not in caplog.text


def test_a_cap_counts_an_erased_entry_as_one(redis_url, redis_client, log):
    ids = [log.batch(0) for _ in range(6)]
    log.erase(0, ids[0])
    log.erase(0, ids[2])
    reader = stream_reader(redis_url, maxBatchesPerTrigger="2", failOnDataLoss="true")
    (info,) = offsets.stream_infos(redis_client, [log_key(0)])
    stop = offsets.latest(info)
    origin = Position(offsets.ORIGIN, 0)
    assert reader._nth(redis_client, 0, origin, stop, 2) == Position(ids[1], 2)
    assert reader._nth(redis_client, 0, Position(ids[1], 2), stop, 1) == Position(ids[2], 3)
    assert reader._nth(redis_client, 0, Position(ids[2], 3), stop, 2) == Position(ids[4], 5)
    _, batches = drain(reader, reader.initialOffset(), ReadMaxRows(2))
    assert batches == [[ids[1]], [ids[3]], [ids[4], ids[5]]]  # two entries each, erased or not
    redis_client.hdel(log_key(0) + ":erased", ids[0])  # dropped: the stream starts at ids[1]
    assert reader._nth(redis_client, 0, origin, stop, 2) == Position(ids[2], 3)


def test_an_attempt_erased_gives_no_row_and_is_no_loss(redis_url, redis_client, caplog):
    key = Keys("busbar:").shard(1).attempt_stream
    fields = {"subscriber": "billing", "batch": 1, "status": "500", "body": ""}
    ids = [redis_client.xadd(key, {**fields, "attempt": n}).decode() for n in range(1, 5)]
    erase(redis_client, key, ids[1])
    erase(redis_client, key, ids[3])
    options = SourceOptions(redis_url, fail_on_data_loss=True, table="attempts")
    with caplog.at_level(logging.WARNING):
        rows = read_all(redis_client, options)
    assert [(r["stream_id"], r["attempt"]) for r in rows] == [(ids[0], 1), (ids[2], 3)]
    assert "trimmed" not in caplog.text
