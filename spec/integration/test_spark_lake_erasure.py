"""An erasure reaches the lake: events for two urls published to `busbar web`,
delivered by `busbar worker`, ingested by `busbar spark ingest`; then one url erased
(POST /erasures) and, once the workers have erased Redis (`redis_done_at`), the next
ingest deletes its rows. Afterwards no byte of any file under the lake (Parquet and
_delta_log) holds the url or its data, the other url's rows are all there, the erasure's
record says what the lake removed, another ingest adds nothing, and a replay of the
window brings back only the other url. Last, a payload retention on the topic: the next
ingest deletes the rows past it, and no byte of their data is left.

On one Redis (`layout_free`): the erasure of Redis runs on both layouts in
test_erasure.py, and the ingest's reading of a Redis Cluster's streams in
test_spark_cluster.py (whose bus runs on one); what the lake's erasure reads and writes
in Redis is the catalog's erasure records, keys of one hash tag (one slot), and a
stream's `:erased` companion shares its stream's tag (spark/erased.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spec.conftest import ROOT_KEY
from spec.integration.bus import bus
from spec.integration.processes import busbar_env, wait_until
from spec.integration.subscriber import Subscriber, serving
from spec.integration.test_erasure import everything as every_key
from spec.integration.test_spark_lake import attempt_rows, lake_rows
from spec.integration.test_spark_replay import replay

pytest.importorskip("pyspark")
T0 = 1_767_225_600_000
ALICE, BOB = "https://people.test/alice", "https://people.test/bob"
SECRET = "alice-secret-7f3a"


def published() -> list[dict]:
    return [
        {"type": "update", "url": url, "timestamp": T0 + i * 1000,
         "data": {"note": SECRET if url == ALICE else f"bob-{i}"}}
        for i in range(6) for url in (ALICE, BOB)
    ]  # fmt: skip


def spark_ingest(redis_url: str, lake: Path, *extra: str) -> str:
    command = [sys.executable, "-m", "busbar", "spark", "ingest", "--available-now",
               "--output", str(lake), "--checkpoint", str(lake / "_checkpoint"),
               "--master", "local[2]", *extra]  # fmt: skip
    done = subprocess.run(command, env=busbar_env(BUSBAR_REDIS_URL=redis_url),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, causes(done.stderr)
    return done.stdout


def causes(stderr: str) -> str:
    """What a failed run says of why, first: the lines naming an exception or its cause
    (a query's failure repeats its plan and offsets at length, which hid them), each
    once, then the end of what it printed."""
    named = ("Error", "Exception", "Caused by", "busbar: ")
    said = dict.fromkeys(line.strip()[:400] for line in stderr.splitlines()
                         if any(word in line for word in named))  # fmt: skip
    return "\n".join(list(said)[:30]) + "\n...\n" + stderr[-1500:]


def redis_done(client, erasure_id: str) -> bool:
    """The workers have erased every Redis store: the lake may erase now."""
    return bool(client.hget(f"busbar:{{c}}:erasure:{erasure_id}", "redis_done_at"))


@pytest.mark.jvm
@pytest.mark.layout_free
@pytest.mark.timeout(900)  # Spark starts four times
def test_an_erased_url_leaves_no_byte_in_the_lake(redis_url: str, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    refusing = Subscriber(responder=lambda _: (500, 0.0), body_out=b"no room for " + ALICE.encode())
    with serving() as a, serving() as b, serving(refusing) as dead, \
            bus(redis_url, tmp_path) as the_bus:  # fmt: skip
        the_bus.client("pub"), the_bus.client("a"), the_bus.client("b"), the_bus.client("dead")
        the_bus.subscribe("a", a.url, ["people"], max=3, timeout=0, event_ids=True)
        the_bus.subscribe("dead", dead.url, ["people"], max=4, timeout=0, max_attempts=1)
        the_bus.publish("pub", "people", published())
        a.wait_for(12)
        wait_until(lambda: the_bus.subscription("a")["events"]["sent"] == 12, what="acks")
        wait_until(lambda: len(the_bus.call("GET", "/subscriber/deadletters", "dead").json()) == 12,
                   30, "the dead letters")  # fmt: skip
        assert "12 events" in spark_ingest(redis_url, lake)
        assert ALICE.encode() in every_byte(lake)
        client = the_bus.redis()
        # what the lake must lose: the attempts of Alice's batches, and those whose answer
        # names her (all of the refusing subscriber's, Bob's events in them too)
        hers = {(r["subscriber"], r["batch_id"]) for r in lake_rows(lake) if r["url"] == ALICE}
        tried = attempt_rows(lake)
        named = [r for r in tried if (r["subscriber"], r["batch_id"]) in hers
                 or ALICE in (r["body"] or "")]  # fmt: skip
        refused = [r for r in tried if r["subscriber"] == "dead"]
        assert len(refused) == len(dead.received) > 0 and all(r in named for r in refused)
        assert {r["subscriber"] for r in named} == {"a", "dead"}

        asked = the_bus.call("POST", "/erasures", ROOT_KEY, {"url": ALICE})
        assert asked.status_code == 202, asked.text
        erasure_id = asked.json()["id"]
        wait_until(lambda: redis_done(client, erasure_id), 60, "Redis erased")

        said = spark_ingest(redis_url, lake, "--erase-now")
        assert f"erasure {erasure_id}: 6 events" in said, said
        everything = every_byte(lake)
        assert ALICE.encode() not in everything and SECRET.encode() not in everything
        rows = lake_rows(lake)
        assert sorted((r["url"], r["t"]) for r in rows) == [(BOB, T0 + i * 1000) for i in range(6)]
        record = client.hgetall(f"busbar:{{c}}:erasure:{erasure_id}")
        lakes = [json.loads(v) for k, v in record.items() if k.startswith(b"lake:")]
        assert len(lakes) == 1 and (lakes[0]["events"], lakes[0]["attempts"]) == (6, len(named))
        assert lakes[0]["files_rewritten"] >= 2  # the events' file and the attempts'
        assert len(attempt_rows(lake)) == len(tried) - len(named)

        def receipt() -> dict:
            return the_bus.call("GET", f"/erasures/{erasure_id}", ROOT_KEY).json()

        # the workers see the lake's part done (they look every 10 s) and forget the url
        wait_until(lambda: receipt()["state"] == "done", 60, "the erasure done")
        done_receipt = receipt()
        assert [lake_["state"] for lake_ in done_receipt["lakes"]] == ["erased"]
        assert done_receipt["lakes"][0]["events"] == 6 and "url" not in done_receipt
        assert ALICE.encode() not in b"".join(client.hvals(f"busbar:{{c}}:erasure:{erasure_id}"))
        in_redis = every_key(client)  # every key, whole: Bob's dead letters, not Alice's
        assert ALICE.encode() not in in_redis and SECRET.encode() not in in_redis
        assert BOB.encode() in in_redis and b"bob-1" in in_redis
        dead_letters = the_bus.call("GET", "/subscriber/deadletters", "dead").json()
        assert sorted(e["url"] for e in dead_letters) == [BOB] * 6, dead_letters

        again = spark_ingest(redis_url, lake)
        assert "0 events" in again and "erasure" not in again.replace("0 erasures", "")
        assert len(lake_rows(lake)) == 6

        the_bus.subscribe("b", b.url, ["people"], max=6, timeout=0, event_ids=True)
        done = replay(redis_url, "--lake", str(lake), "--topic", "people", "--to", "b")
        assert done.returncode == 0, done.stderr[-2000:]
        b.wait_for(6)
        assert sorted(e["url"] for e in b.delivered) == [BOB] * 6

        # retention in the lake (docs/erasure.md): the topic's set to a day, and its rows,
        # whose `t` is January's, go at the next ingest (the replay's to b too); the
        # attempts, younger, stay
        attempts = len(attempt_rows(lake))
        put = the_bus.call("PUT", "/topics/people/retention", ROOT_KEY, {"retention_s": 86_400})
        assert put.status_code == 200, put.text
        said = spark_ingest(redis_url, lake, "--erase-now")
        assert "retention: 6 events, 0 attempts past their retention deleted" in said, said
        assert lake_rows(lake) == [] and len(attempt_rows(lake)) > attempts  # b's came
        assert b"bob-" not in every_byte(lake)


def every_byte(root: Path) -> bytes:
    """Every file under the lake: both tables' Parquet and _delta_log, the checkpoint."""
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())
