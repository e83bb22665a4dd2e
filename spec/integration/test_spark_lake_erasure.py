"""An erasure reaches the lake: events for two urls published to `busbar web`,
delivered by `busbar worker`, ingested by `busbar spark ingest`; then one url erased
(POST /erasures) and, once the workers have erased Redis (`redis_done_at`), the next
ingest deletes its rows. Afterwards no byte of any file under the lake (Parquet and
_delta_log) holds the url or its data, the other url's rows are all there, the erasure's
record says what the lake removed, another ingest adds nothing, and a replay of the
window brings back only the other url."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spec.conftest import ROOT_KEY
from spec.integration.bus import bus
from spec.integration.processes import busbar_env, wait_until
from spec.integration.subscriber import serving
from spec.integration.test_spark_lake import lake_rows
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
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def redis_done(client, erasure_id: str) -> bool:
    """The workers have erased every Redis store: the lake may erase now."""
    return bool(client.hget(f"busbar:{{c}}:erasure:{erasure_id}", "redis_done_at"))


@pytest.mark.jvm
@pytest.mark.timeout(900)  # Spark starts four times
def test_an_erased_url_leaves_no_byte_in_the_lake(redis_url: str, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    with serving() as a, serving() as b, bus(redis_url, tmp_path) as the_bus:
        the_bus.client("pub"), the_bus.client("a"), the_bus.client("b")
        the_bus.subscribe("a", a.url, ["people"], max=3, timeout=0, event_ids=True)
        the_bus.publish("pub", "people", published())
        a.wait_for(12)
        wait_until(lambda: the_bus.subscription("a")["events"]["sent"] == 12, what="acks")
        assert "12 events" in spark_ingest(redis_url, lake)
        assert ALICE.encode() in every_byte(lake)

        asked = the_bus.call("POST", "/erasures", ROOT_KEY, {"url": ALICE})
        assert asked.status_code == 202, asked.text
        erasure_id = asked.json()["id"]
        client = the_bus.redis()
        wait_until(lambda: redis_done(client, erasure_id), 60, "Redis erased")

        said = spark_ingest(redis_url, lake, "--erase-now")
        assert f"erasure {erasure_id}: 6 events" in said, said
        everything = every_byte(lake)
        assert ALICE.encode() not in everything and SECRET.encode() not in everything
        rows = lake_rows(lake)
        assert sorted((r["url"], r["t"]) for r in rows) == [(BOB, T0 + i * 1000) for i in range(6)]
        record = client.hgetall(f"busbar:{{c}}:erasure:{erasure_id}")
        lakes = [json.loads(v) for k, v in record.items() if k.startswith(b"lake:")]
        assert len(lakes) == 1 and lakes[0]["events"] == 6 and lakes[0]["files_rewritten"] >= 1

        def receipt() -> dict:
            return the_bus.call("GET", f"/erasures/{erasure_id}", ROOT_KEY).json()

        # the workers see the lake's part done (they look every 10 s) and forget the url
        wait_until(lambda: receipt()["state"] == "done", 60, "the erasure done")
        done_receipt = receipt()
        assert [lake_["state"] for lake_ in done_receipt["lakes"]] == ["erased"]
        assert done_receipt["lakes"][0]["events"] == 6 and "url" not in done_receipt
        assert ALICE.encode() not in b"".join(client.hvals(f"busbar:{{c}}:erasure:{erasure_id}"))

        again = spark_ingest(redis_url, lake)
        assert "0 events" in again and "erasure" not in again.replace("0 erasures", "")
        assert len(lake_rows(lake)) == 6

        the_bus.subscribe("b", b.url, ["people"], max=6, timeout=0, event_ids=True)
        done = replay(redis_url, "--lake", str(lake), "--topic", "people", "--to", "b")
        assert done.returncode == 0, done.stderr[-2000:]
        b.wait_for(6)
        assert sorted(e["url"] for e in b.delivered) == [BOB] * 6


def every_byte(root: Path) -> bytes:
    """Every file under the lake: both tables' Parquet and _delta_log, the checkpoint."""
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())
