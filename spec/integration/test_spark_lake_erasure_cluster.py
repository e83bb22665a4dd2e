"""An erasure in a lake written on a Spark cluster, cut by kill -9 (issue 56): a bus (on
one Redis: `layout_free`, the erasure of Redis runs on both layouts in
test_erasure.py and the ingest's reading of a Redis Cluster's streams in
test_spark_cluster.py (whose bus runs on one); what this adds is Spark's side)
delivers 12,000 events of one url and 600 of another;
`busbar spark ingest --master spark://...` (a standalone master and worker from the
pyspark package) writes the lake; the url is erased. The ingest that erases the lake is
killed -9 (its whole process group: the driver and its JVM) right after its first
commit of deleted events, with more to delete; the next ingest finishes the erasure,
and the receipt counts each row once: what a single run removes. Then no byte of the
lake holds the url, no key of Redis does, the other url is whole, and a replay on the
cluster brings back only it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
import redis
from deltalake import DeltaTable

from spec.conftest import ROOT_KEY
from spec.integration.bus import bus
from spec.integration.processes import busbar_env, wait_until
from spec.integration.subscriber import serving
from spec.integration.test_erasure import everything
from spec.integration.test_spark_cluster import standalone  # noqa: F401 (a fixture)
from spec.integration.test_spark_lake import attempt_rows, ingest, lake_rows
from spec.integration.test_spark_lake_erasure import every_byte, redis_done
from spec.integration.test_spark_replay import replay

pytest.importorskip("pyspark")
ALICE, BOB = "https://people.test/alice", "https://people.test/bob"
SECRET = "alice-secret-5c1e"
ALICES, BOBS = 12_000, 600  # Alice's rows take three delete commits (5,000 each)
BULK = 420  # events a publish: 20 of Bob's, 400 of Alice's


def published(start: int) -> list[dict]:
    """BULK events, Alice's and one Bob's in every 21."""
    return [
        {"type": "update", "url": BOB if n % 21 == 20 else ALICE,
         "data": {"n": n, "note": f"bob-{n}" if n % 21 == 20 else SECRET}}
        for n in range(start, start + BULK)
    ]  # fmt: skip


def erasing_commits(table: Path) -> int:
    """The table's commits made for an erasure (they carry `busbar.erasure`)."""
    log = table / "_delta_log"
    if not log.is_dir():
        return 0
    return sum(b'"busbar.erasure"' in p.read_bytes() for p in log.glob("*.json"))


def rows_of(table: Path, url: str) -> int:
    current = pa.table(DeltaTable(str(table)).to_pyarrow_table(columns=["url"]))
    return current.column("url").to_pylist().count(url)


@pytest.mark.jvm
@pytest.mark.layout_free
@pytest.mark.timeout(900)  # Spark starts four times, on a cluster
def test_an_erasure_cut_by_kill_on_a_spark_cluster_completes_exactly(
    redis_url: str,
    redis_client: redis.Redis,
    standalone: str,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    client = redis_client
    lake, checkpoint = tmp_path / "lake", tmp_path / "checkpoint"
    with serving() as a, serving() as late, bus(redis_url, tmp_path) as b:
        b.client("pub"), b.client("a"), b.client("late")
        b.subscribe("a", a.url, ["people"], max=500, timeout=0, event_ids=True)
        sent = [e for start in range(0, ALICES + BOBS, BULK) for e in published(start)]
        for start in range(0, len(sent), BULK):
            b.publish("pub", "people", sent[start : start + BULK])
        assert sum(e["url"] == ALICE for e in sent) == ALICES
        wait_until(lambda: b.subscription("a")["events"]["sent"] == len(sent), 120, "acks")
        said = ingest(redis_url, lake, checkpoint, master=standalone)
        assert f"{len(sent)} events" in said, said
        alice_batches = {(r["subscriber"], r["batch_id"]) for r in lake_rows(lake)
                         if r["url"] == ALICE}  # fmt: skip
        alice_attempts = sum((r["subscriber"], r["batch_id"]) in alice_batches
                             for r in attempt_rows(lake))  # fmt: skip
        assert alice_attempts >= len(alice_batches) > 0

        asked = b.call("POST", "/erasures", ROOT_KEY, {"url": ALICE})
        assert asked.status_code == 202, asked.text
        erasure_id = asked.json()["id"]
        wait_until(lambda: redis_done(client, erasure_id), 60, "Redis erased")

        # the ingest that erases the lake, killed -9 after its first commit of events
        command = [sys.executable, "-m", "busbar", "spark", "ingest", "--available-now",
                   "--output", str(lake), "--checkpoint", str(checkpoint),
                   "--master", standalone, "--erase-now"]  # fmt: skip
        cut = subprocess.Popen(command, env=busbar_env(BUSBAR_REDIS_URL=redis_url),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)  # fmt: skip
        try:
            deadline = time.monotonic() + 240
            while erasing_commits(lake / "events") == 0:
                assert cut.poll() is None, "the ingest ended before it was cut"
                assert time.monotonic() < deadline, "no commit of the erasure came"
                time.sleep(0.005)
            os.killpg(cut.pid, signal.SIGKILL)
        finally:
            cut.wait(30)
        assert 0 < rows_of(lake / "events", ALICE) < ALICES  # cut with commits to go
        record = f"busbar:{{c}}:erasure:{erasure_id}"
        assert not [k for k in client.hkeys(record) if k.startswith(b"lake:")]

        again = ingest(redis_url, lake, checkpoint, master=standalone, extra=["--now"])
        assert f"erasure {erasure_id}: {ALICES} events, {alice_attempts} attempts" in again, again
        assert erasing_commits(lake / "events") == 3
        assert ALICE.encode() not in every_byte(lake) and SECRET.encode() not in every_byte(lake)
        kept = sorted(json.loads(r["data"])["n"] for r in lake_rows(lake))
        assert kept == [e["data"]["n"] for e in sent if e["url"] == BOB]
        lakes = [json.loads(v) for k, v in client.hgetall(record).items()
                 if k.startswith(b"lake:")]  # fmt: skip
        assert [(x["events"], x["attempts"]) for x in lakes] == [(ALICES, alice_attempts)]
        assert lakes[0]["files_rewritten"] >= 3 and lakes[0]["bytes_rewritten"] > 0

        def receipt() -> dict:
            return b.call("GET", f"/erasures/{erasure_id}", ROOT_KEY).json()

        wait_until(lambda: receipt()["state"] == "done", 60, "the erasure done")
        assert [(x["state"], x["events"]) for x in receipt()["lakes"]] == [("erased", ALICES)]
        assert ALICE.encode() not in everything(client)
        assert SECRET.encode() not in everything(client)

        b.subscribe("late", late.url, ["people"], max=500, timeout=0)
        done = replay(redis_url, "--lake", str(lake), "--topic", "people", "--to", "late",
                      master=standalone)  # fmt: skip
        assert done.returncode == 0 and f"{BOBS} events queued to late" in done.stdout, done.stderr
        late.wait_for(BOBS)
        assert {e["url"] for e in late.delivered} == {BOB}
