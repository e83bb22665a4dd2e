"""The source's planning rules against a real Redis, without a JVM: where reading starts,
trimming below a checkpoint, a checkpoint ahead of the stream, per-trigger caps."""

from __future__ import annotations

import json
import logging
import pickle

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from app.models.keys import Keys
from spark import attempt_rows, offsets, rows
from spark.errors import DataLossError, OffsetAheadError, OptionError
from spark.source import BusbarDataSource
from spec.spark.logdata import LogWriter, log_key


@pytest.fixture
def log(redis_client):
    return LogWriter(redis_client)


def stream_reader(redis_url, **options):
    given = CaseInsensitiveDict({"redis.url": redis_url, **options})
    return BusbarDataSource(given).streamReader(rows.SCHEMA)


def drain(reader, start: dict, limit=None) -> tuple[dict, list[list[str]]]:
    """Plan and read micro-batches like the engine until the offset stops moving."""
    batches: list[list[str]] = []
    while True:
        end = reader.latestOffset(start, limit or ReadAllAvailable())
        if json.dumps(end) == json.dumps(start):
            return start, batches
        ids: list[str] = []
        for part in reader.partitions(start, end):
            for batch in reader.read(part):
                ids.extend(dict.fromkeys(batch.column("stream_id").to_pylist()))
        batches.append(ids)
        reader.commit(end)
        start = end


def test_stream_ids_order_and_exclusive_starts():
    assert offsets.parse_id("5-3") < offsets.parse_id("6-0") < offsets.parse_id("6-1")
    assert offsets.parse_id("7") == (7, 0)
    assert offsets.predecessor("6-1") == "6-0"
    assert offsets.predecessor("6-0") == f"5-{offsets.MAX_SEQ}"
    assert offsets.predecessor("0-0") == "0-0"
    with pytest.raises(OptionError):
        offsets.parse_id("yesterday")


def test_options_are_read_as_spelled_and_checked(redis_url):
    reader = stream_reader(redis_url, failOnDataLoss="true", maxBatchesPerTrigger="7")
    assert reader.options.fail_on_data_loss
    assert reader.getDefaultReadLimit() == ReadMaxRows(7)
    assert stream_reader(redis_url).getDefaultReadLimit() == ReadAllAvailable()
    with pytest.raises(OptionError, match=r"redis\.url"):
        BusbarDataSource(CaseInsensitiveDict({}))
    with pytest.raises(OptionError, match="partition 9"):
        stream_reader(redis_url, startingOffsets='{"9": "1-0"}')
    with pytest.raises(OptionError, match="true or false"):
        stream_reader(redis_url, failOnDataLoss="maybe")


def test_the_table_option_picks_the_streams_and_the_rows(redis_url, redis_client, caplog):
    source = BusbarDataSource(CaseInsensitiveDict({"redis.url": redis_url, "table": "attempts"}))
    assert source.schema() == attempt_rows.SCHEMA
    assert source.parsed.keys()[1] == Keys("busbar:").shard(1).attempt_stream
    with pytest.raises(OptionError, match="table must be one of events, attempts"):
        stream_reader(redis_url, table="deliveries")
    key = Keys("busbar:").shard(0).attempt_stream
    fields = {"subscriber": "billing", "batch": 1, "status": "500", "body": ""}
    first = redis_client.xadd(key, fields).decode()
    reader = source.streamReader(attempt_rows.SCHEMA)
    start = reader.initialOffset()
    for _ in range(3):
        redis_client.xadd(key, fields)
    redis_client.xtrim(key, maxlen=1, approximate=False)
    with caplog.at_level(logging.WARNING):
        _, batches = drain(reader, start)
    assert len(batches) == 1 and first not in batches[0]
    assert "busbar attempt stream partition 0: 3 entries after" in caplog.text


def test_reader_is_picklable_and_holds_no_connection(redis_url, log):
    log.fill(4)
    reader = stream_reader(redis_url)
    reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert pickle.loads(pickle.dumps(reader)).options == reader.options


def test_earliest_on_a_trimmed_stream_is_not_a_loss(redis_url, log, redis_client, caplog):
    ids = [log.batch(0) for _ in range(5)]
    redis_client.xtrim(log_key(0), maxlen=2, approximate=False)
    reader = stream_reader(redis_url)
    with caplog.at_level(logging.WARNING):
        _, batches = drain(reader, reader.initialOffset())
    assert batches == [ids[3:]]
    assert "trimmed" not in caplog.text


def test_latest_and_per_partition_json_starts(redis_url, log):
    ids = [log.batch(p) for p in (0, 1, 0, 1)]
    latest = stream_reader(redis_url, startingOffsets="latest")
    start = latest.initialOffset()
    assert start["0"] == {"id": ids[2], "n": 2}
    newer = log.batch(1)
    assert drain(latest, start)[1] == [[newer]]
    chosen = stream_reader(redis_url, startingOffsets=json.dumps({"0": ids[0]}))
    start = chosen.initialOffset()
    assert start["0"] == {"id": ids[0], "n": 1}  # n counted from the stream
    assert start["1"]["n"] == 0  # missing from the JSON: earliest
    assert sorted(drain(chosen, start)[1][0]) == sorted([ids[2], ids[1], ids[3], newer])


def test_checkpoint_below_trimmed_entries_warns_and_continues(redis_url, log, redis_client, caplog):
    ids = [log.batch(0) for _ in range(3)]
    reader = stream_reader(redis_url)
    checkpoint, _ = drain(reader, reader.initialOffset())
    ids += [log.batch(0) for _ in range(5)]
    redis_client.xtrim(log_key(0), maxlen=2, approximate=False)
    resumed = stream_reader(redis_url)
    with caplog.at_level(logging.WARNING):
        _, batches = drain(resumed, checkpoint)
    assert batches == [ids[-2:]]
    assert f"partition 0: 3 entries after {ids[2]} were trimmed" in caplog.text


def test_checkpoint_below_trimmed_entries_fails_on_data_loss(redis_url, log, redis_client):
    log.batch(0)
    checkpoint, _ = drain(stream_reader(redis_url), stream_reader(redis_url).initialOffset())
    for _ in range(4):
        log.batch(0)
    redis_client.xtrim(log_key(0), maxlen=1, approximate=False)
    with pytest.raises(DataLossError, match=r"3 entries after .* were trimmed"):
        stream_reader(redis_url, failOnDataLoss="true").latestOffset(checkpoint, ReadAllAvailable())


def test_consumed_checkpoint_entry_trimmed_is_no_loss(redis_url, log, redis_client, caplog):
    for _ in range(4):
        log.batch(0)
    reader = stream_reader(redis_url, failOnDataLoss="true")
    checkpoint, _ = drain(reader, reader.initialOffset())
    newer = log.batch(0)
    redis_client.xtrim(log_key(0), maxlen=1, approximate=False)
    assert drain(stream_reader(redis_url, failOnDataLoss="true"), checkpoint)[1] == [[newer]]


def test_checkpoint_ahead_of_the_stream_is_an_error(redis_url, log, redis_client):
    for _ in range(3):
        log.batch(2)
    reader = stream_reader(redis_url)
    checkpoint, _ = drain(reader, reader.initialOffset())
    redis_client.delete(log_key(2))  # recreated: fewer entries than checkpointed
    log.batch(2)
    with pytest.raises(OffsetAheadError, match="partition 2: the checkpoint is ahead"):
        stream_reader(redis_url).latestOffset(checkpoint, ReadAllAvailable())
    redis_client.flushdb()  # wrong (empty) Redis
    with pytest.raises(OffsetAheadError, match="not the Redis"):
        stream_reader(redis_url).latestOffset(checkpoint, ReadAllAvailable())


def test_cap_shares_entries_across_partitions_and_reads_each_once(redis_url, log):
    written = [log.batch(p) for p in [0] * 9 + [1] + [3] * 4]
    reader = stream_reader(redis_url, maxBatchesPerTrigger="5")
    _, batches = drain(reader, reader.initialOffset(), ReadMaxRows(5))
    assert all(len(batch) <= 5 for batch in batches)
    assert sorted(i for batch in batches for i in batch) == sorted(written)
    assert len(batches) == 3
    assert set(batches[0]) >= {written[9]}  # the small partition is not starved


def test_available_now_stops_at_what_existed(redis_url, log):
    first = [log.batch(p) for p in range(4)]
    reader = stream_reader(redis_url)
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    log.batch(0)
    _, batches = drain(reader, start, ReadMaxRows(2))
    assert sorted(i for batch in batches for i in batch) == sorted(first)


def test_entries_trimmed_between_planning_and_reading(redis_url, log, redis_client, caplog):
    for _ in range(4):
        log.batch(1)
    reader = stream_reader(redis_url)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    (part,) = reader.partitions(start, end)
    redis_client.xtrim(log_key(1), maxlen=1, approximate=False)
    with caplog.at_level(logging.WARNING):
        assert sum(b.num_rows for b in reader.read(part)) == 2  # one entry of two events
    assert "partition 1: 3 entries in" in caplog.text
    strict = stream_reader(redis_url, failOnDataLoss="true")
    with pytest.raises(DataLossError):
        list(strict.read(part))


def test_json_start_older_than_the_trimmed_head(redis_url, log, redis_client, caplog):
    ids = [log.batch(0) for _ in range(4)]
    redis_client.xtrim(log_key(0), maxlen=1, approximate=False)
    start = json.dumps({"0": ids[0]})
    reader = stream_reader(redis_url, startingOffsets=start)
    with caplog.at_level(logging.WARNING):
        assert drain(reader, reader.initialOffset())[1] == [[ids[3]]]
    assert f"offset {ids[0]} is older than the first available entry {ids[3]}" in caplog.text
    with pytest.raises(DataLossError, match="may have been trimmed"):
        stream_reader(redis_url, startingOffsets=start, failOnDataLoss="true").initialOffset()


def test_more_streams_than_partitions_and_empty_batch_reads(redis_url, log, caplog):
    log.batch(4)
    source = BusbarDataSource(CaseInsensitiveDict({"redis.url": redis_url}))
    batch_reader = source.reader(rows.SCHEMA)
    with caplog.at_level(logging.WARNING):
        assert batch_reader.partitions() == []
    assert f"{log_key(4)} exists but partitions=4" in caplog.text
    assert list(batch_reader.read(InputPartition(None))) == []


def test_replies_of_a_cluster_transaction_are_read_as_parsed_ones():
    """redis-py's cluster client leaves replies in a transaction as the server gave them
    (bytes keys, entries as flat lists): the capped planner's XINFO and XRANGE, and the
    readers', run in one."""
    raw = {b"entries-added": 5, b"length": 2, b"last-generated-id": b"9-0",
           b"first-entry": [b"8-0", [b"a", b"1"]]}  # fmt: skip
    info = offsets.StreamInfo.from_replies(raw, b"2", [b"n", b"3-0", b"9-0"])
    assert (info.trimmed, info.first, info.erased_ids, info.head) == (1, "8-0", ((3, 0), (9, 0)), 1)
    assert info.oldest == "3-0"
    assert offsets.entries_of([[b"8-0", [b"a", b"1", b"b", b""]]]) == [
        (b"8-0", {b"a": b"1", b"b": b""})
    ]
