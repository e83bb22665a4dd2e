"""The whole path a user takes to the lake: publish to `busbar web`, deliver with
`busbar worker` to real subscribers (one fails its first batch with a 500), then
`busbar spark ingest` as a process; the lake holds exactly what the subscribers
acknowledged, and every attempt, and a rerun adds nothing.

On one Redis (`layout_free`): the ingest reads a Redis Cluster's streams in
test_spark_cluster.py, whose bus runs on one, and writes the same lake there as here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spec.integration.bus import bus, events
from spec.integration.processes import busbar_env, wait_until
from spec.integration.subscriber import Subscriber, serving

pytestmark = pytest.mark.layout_free

pa = pytest.importorskip("pyarrow")
DeltaTable = pytest.importorskip("deltalake").DeltaTable
pytest.importorskip("pyspark")


def ingest(redis_url: str, lake: Path, checkpoint: Path, master: str = "local[2]",
           extra: list[str] | None = None) -> str:  # fmt: skip
    """`busbar spark ingest --available-now`; what it said."""
    command = [sys.executable, "-m", "busbar", "spark", "ingest", "--available-now"]
    command += ["--output", str(lake), "--checkpoint", str(checkpoint), "--master", master]
    command += extra or []
    env = busbar_env(BUSBAR_REDIS_URL=redis_url)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def current(path: Path):
    """A Delta table's current rows (the files its log lists), with `date`."""
    return pa.table(DeltaTable(str(path)).to_pyarrow_table())


def lake_rows(lake: Path) -> list[dict]:
    table = current(lake / "events")
    return sorted(table.to_pylist(), key=lambda r: (r["subscriber"], r["url"]))


def attempt_rows(lake: Path) -> list[dict]:
    rows = current(lake / "attempts").to_pylist()
    return sorted(rows, key=lambda r: (r["stream_partition"], r["stream_id"]))


@pytest.mark.jvm
@pytest.mark.timeout(300)  # a JVM beside the other test processes' JVMs took over 120 s
def test_delivered_events_land_in_the_lake_once(redis_url: str, redis_client, tmp_path: Path):
    answers = iter([500])  # slow's first batch fails once
    slow_sub = Subscriber(responder=lambda _: (next(answers, 200), 0.0))
    env = {"BUSBAR_RETRY_FIRST_MS": "200"}
    with serving() as fast, serving(slow_sub) as slow, bus(redis_url, tmp_path, **env) as b:
        b.client("pub"), b.client("fast"), b.client("slow")
        b.subscribe(
            "fast", fast.url, [{"topic": "orders", "priority": 2}], max=4, timeout=0, event_ids=True
        )
        b.subscribe("slow", slow.url, ["orders", "users"], max=10, timeout=100)
        b.publish("pub", "orders", events(9))
        b.publish("pub", "users", events(3, start=100, type_="update"))
        fast.wait_for(9), slow.wait_for(12)
        wait_until(lambda: b.subscription("slow")["events"]["sent"] == 12, what="acks")
        wait_until(lambda: b.subscription("fast")["events"]["sent"] == 9, what="acks")

    lake, checkpoint = tmp_path / "lake", tmp_path / "checkpoint"
    said = ingest(redis_url, lake, checkpoint)
    tried = len(fast.received) + len(slow.received)  # each request is one attempt
    assert "21 events" in said and f"{tried} attempts in " in said
    rows = lake_rows(lake)
    delivered = sorted(
        [("fast", e) for e in fast.delivered] + [("slow", e) for e in slow.delivered],
        key=lambda pair: (pair[0], pair[1]["url"]),
    )
    assert [(r["subscriber"], r["topic"], r["type"], r["url"], r["t"]) for r in rows] == [
        (who, e["topic"], e["type"], e["url"], e["t"]) for who, e in delivered
    ]
    assert [json.loads(r["data"]) for r in rows] == [e["data"] for _, e in delivered]
    assert {r["priority"] for r in rows if r["subscriber"] == "fast"} == {2}
    assert {r["priority"] for r in rows if r["subscriber"] == "slow"} == {None}
    assert len({r["batch_id"] for r in rows if r["subscriber"] == "fast"}) == 3  # 4+4+1
    assert all(r["delivered_at"] >= r["created_at"] for r in rows)
    assert {r["attempts"] for r in rows if r["subscriber"] == "fast"} == {1}
    assert {r["attempts"] for r in rows if r["subscriber"] == "slow"} == {1, 2}  # the 500
    # each row names its event by the id `event_ids` delivers; one event, one id
    fast_ids = [r["id"] for r in rows if r["subscriber"] == "fast"]
    assert fast_ids == [e["id"] for who, e in delivered if who == "fast"]
    by_url = {(r["topic"], r["url"]): r["id"] for r in rows if r["subscriber"] == "fast"}
    slow_orders = [r for r in rows if r["subscriber"] == "slow" and r["topic"] == "orders"]
    assert [r["id"] for r in slow_orders] == [by_url[("orders", r["url"])] for r in slow_orders]
    assert len({r["id"] for r in rows}) == 12  # 9 orders (to both) and 3 users

    # every attempt, by client name, with its answer
    attempts = attempt_rows(lake)
    made = [("fast", r.status) for r in fast.received] + [("slow", r.status) for r in slow.received]
    assert sorted((a["subscriber"], a["status"]) for a in attempts) == sorted(made)
    assert [a["outcome"] for a in attempts if a["status"] == 500] == ["5xx"]
    assert {a["attempt"] for a in attempts if a["subscriber"] == "slow"} == {1, 2}
    assert len({(a["stream_partition"], a["stream_id"]) for a in attempts}) == len(attempts)

    again = ingest(redis_url, lake, checkpoint)  # nothing new: nothing added
    assert "0 events" in again and "0 attempts" in again
    assert len(lake_rows(lake)) == 21 and attempt_rows(lake) == attempts
