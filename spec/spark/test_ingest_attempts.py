"""The attempts table end to end with the test session (local[2]): attempts made by the
real delivery scripts against a real subscriber (refused, 500, 200) land in
`DIR/attempts` once each, by client name, classified as the API classifies them; the
table's own offsets resume it, and it is rebuilt alone without touching the events."""

from __future__ import annotations

import shutil

import pytest

from spark.ingest import ingest
from spark.lake import attempts as lake_attempts
from spec.app.delivery.delivery_bench import Bench, refused_failed_delivered

pytestmark = pytest.mark.jvm

COLUMNS = ("subscriber", "batch_id", "events", "lane", "attempt", "outcome", "status", "reason")


def test_attempts_land_once_in_their_own_table(
    redis_client, keys, scripts, spark, redis_url, tmp_path
):
    bench = Bench(redis_client, keys, scripts, max_backoff_ms=1)
    lake, checkpoint = tmp_path / "lake", tmp_path / "checkpoint"

    def run(**kwargs):
        return ingest(lake, checkpoint, redis_url, partitions=keys.shards, spark=spark, **kwargs)

    with refused_failed_delivered(bench, b"thanks"):
        first = run()
        assert (first.tables["attempts"].rows, first.rows) == (3, 2)
        assert first.tables["attempts"].path == f"{lake}/attempts"
        again = run()  # nothing new: each table's offsets say so
        assert (again.tables["attempts"].rows, again.rows) == (0, 0)
        bench.clock.advance(10)
        assert bench.run().kind == "delivered"  # the second batch: one more of each
        assert (run().tables["attempts"].rows, len(lake_attempts(spark, lake).collect())) == (1, 4)

    found = sorted(
        (r.asDict() for r in lake_attempts(spark, lake).collect()), key=lambda r: r["stream_id"]
    )
    assert [tuple(r[c] for c in COLUMNS) for r in found] == [
        ("Subscriber Service", 1, 2, 10, 1, "connection", None, "connection_refused"),
        ("Subscriber Service", 1, 2, 10, 2, "5xx", 500, None),
        ("Subscriber Service", 1, 2, 10, 3, "2xx", 200, None),
        ("Subscriber Service", 2, 1, 10, 1, "2xx", 200, None),
    ]
    assert found[2]["body"] == "thanks" and found[1]["retry_after_ms"] is None
    assert {r["stream_partition"] for r in found} == {keys.shard_of("sub")}
    assert len({r["stream_id"] for r in found}) == 4
    assert all(str(r["date"]) == r["at"].date().isoformat() for r in found)
    assert all("sub" not in r.values() for r in found)  # the token is nowhere

    # the attempts table rebuilt alone: its directory and offsets gone, the events kept
    shutil.rmtree(lake / "attempts")
    shutil.rmtree(checkpoint / "attempts")
    rebuilt = run(tables=["attempts"])
    assert (rebuilt.tables["attempts"].rows, list(rebuilt.tables)) == (4, ["attempts"])
    assert len(lake_attempts(spark, lake).collect()) == 4
    assert spark.read.parquet(str(lake / "events")).count() == 3
