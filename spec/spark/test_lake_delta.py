"""The lake's Delta tables without a JVM: each micro-batch committed once, no statistics
of the erasable columns in the log, an erasure by url or by key (topics, before) deleting
exactly its rows from both tables and leaving nothing of them on disk once vacuumed, and
the ingest's upkeep (spark/keeper.py) against a real Redis."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from app.models.keys import Keys
from spark import delta, lake_erase
from spark.keeper import Keeper
from spark.tables import ATTEMPTS, EVENTS

AT = datetime(2026, 1, 1, tzinfo=UTC)
SECRET = "https://people.test/alice"


def event(n: int, url: str, *, topic: str = "orders", key: str | None = None,
          subscriber: str = "billing", batch: int | None = None) -> dict:  # fmt: skip
    return {
        "id": f"evt_{n}", "subscriber": subscriber, "topic": topic, "type": "update",
        "url": url, "t": 1_000 + n, "data": json.dumps({"who": url}), "priority": None,
        "batch_id": n if batch is None else batch, "position": 0, "attempts": 1,
        "created_at": AT, "first_attempt_at": AT, "delivered_at": AT,
        "stream_partition": n % 2, "stream_id": f"{1000 + n}-0", "traceparent": None,
        "tracestate": None, "key": key, "schema_version": None, "date": date(2026, 1, 1),
    }  # fmt: skip


def attempt(n: int, batch: int, body: str = "ok", subscriber: str = "billing") -> dict:
    return {
        "at": AT, "subscriber": subscriber, "batch_id": batch, "events": 1, "lane": 10,
        "attempt": 1, "worker": "w1", "duration_ms": 3, "outcome": "2xx", "status": 200,
        "reason": None, "retry_after_ms": None, "body": body, "stream_partition": 0,
        "stream_id": f"{5000 + n}-0", "date": date(2026, 1, 1),
    }  # fmt: skip


def rows(table, items: list[dict]) -> pa.Table:
    schema = delta.arrow_schema(table)
    return pa.Table.from_pylist([{f.name: i.get(f.name) for f in schema} for i in items], schema)


def read(path: Path) -> list[dict]:
    return pa.table(DeltaTable(str(path)).to_pyarrow_table()).to_pylist()


def every_byte(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_the_same_micro_batch_twice_adds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "events"
    delta.ensure(path, EVENTS)
    data = rows(EVENTS, [event(1, "https://x.test/1"), event(2, "https://x.test/2")])
    assert delta.commit_batch(path, EVENTS, data, "app", 0) is True
    assert delta.commit_batch(path, EVENTS, data, "app", 0) is False  # the rerun after a crash
    assert delta.commit_batch(path, EVENTS, data, "app", 1) is True
    assert delta.commit_batch(path, EVENTS, data, "other", 0) is True  # another checkpoint's
    assert len(read(path)) == 6
    assert delta.committed(path, "app") == 1
    assert len(delta.current_files(path)) == 3


def test_erasable_columns_have_no_statistics_in_the_log(tmp_path: Path) -> None:
    for table, data in ((EVENTS, rows(EVENTS, [event(1, SECRET, key="k-secret")])),
                        (ATTEMPTS, rows(ATTEMPTS, [attempt(1, 1, body=SECRET)]))):  # fmt: skip
        path = tmp_path / table.name
        delta.ensure(path, table)
        delta.commit_batch(path, table, data, "app", 0)
        log = b"".join(p.read_bytes() for p in (path / "_delta_log").glob("*.json"))
        assert SECRET.encode() not in log and b"k-secret" not in log
        adds = [json.loads(line)["add"] for line in log.splitlines() if b'"add"' in line]
        stats = json.loads(adds[0]["stats"])
        for column in ("url", "key", "data", "body"):
            assert column not in stats["minValues"] and column not in stats["maxValues"]
        assert "subscriber" in stats["minValues"]  # the others keep theirs


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """Events of SECRET (orders, t 1001 and 1003; users, t 1002) and of others, spread
    over three micro-batches (files), with the attempts of their batches."""
    out = tmp_path / "lake"
    for table in (EVENTS, ATTEMPTS):
        delta.ensure(out / table.name, table)
    batches = [
        [event(1, SECRET), event(4, "https://x.test/4", key="k1")],
        [event(2, SECRET, topic="users"), event(5, "https://x.test/5", key="k1")],
        [event(3, SECRET), event(6, "https://x.test/6", key="k2")],
        [event(7, "https://x.test/7"), event(8, "https://x.test/8")],
    ]
    for n, batch in enumerate(batches):
        delta.commit_batch(out / "events", EVENTS, rows(EVENTS, batch), "app", n)
    tried = [attempt(n, n) for n in range(1, 9)] + [attempt(9, 99, body=f"no such {SECRET}")]
    delta.commit_batch(out / "attempts", ATTEMPTS, rows(ATTEMPTS, tried), "app", 0)
    return out


def erasure(by: str, value: str, topics: tuple[str, ...] = (), before: int = 10**13,
            erasure_id: str = "er_1"):  # fmt: skip
    return lake_erase.Erasure(erasure_id, by, value, topics, before, "running", 1)


def test_erase_by_url_with_topics_and_before(lake: Path) -> None:
    files = len(delta.current_files(lake / "events"))
    outcome = lake_erase.erase(lake, erasure("url", SECRET, ("orders",), before=1_003))
    assert (outcome["events"], outcome["attempts"]) == (1, 2)  # its batch's; the body's
    assert outcome["files_rewritten"] == 2 and outcome["bytes_rewritten"] > 0
    assert len(delta.current_files(lake / "events")) == files  # one file rewritten in place
    left = {(r["url"], r["t"]) for r in read(lake / "events") if r["url"] == SECRET}
    assert left == {(SECRET, 1_002), (SECRET, 1_003)}  # users; not before 1003
    assert {r["batch_id"] for r in read(lake / "attempts")} == {2, 3, 4, 5, 6, 7, 8}
    again = lake_erase.erase(lake, erasure("url", SECRET, ("orders",), before=1_003))
    assert again == outcome  # nothing more deleted; the receipt read back from the log
    other = erasure("url", SECRET, ("orders",), before=1_003, erasure_id="er_2")
    nothing = dict.fromkeys(("events", "attempts", "files_rewritten", "bytes_rewritten"), 0)
    assert lake_erase.erase(lake, other) == nothing


def test_erase_by_key_then_vacuum_leaves_no_byte_of_it(lake: Path) -> None:
    outcome = lake_erase.erase(lake, erasure("key", "k1"))
    assert (outcome["events"], outcome["attempts"]) == (2, 2)
    assert {r["key"] for r in read(lake / "events")} == {None, "k2"}
    everything = lake_erase.erase(lake, erasure("url", SECRET, erasure_id="er_2"))
    assert (everything["events"], everything["attempts"]) == (3, 4)  # 3 batches and the body
    assert lake_erase.vacuum(lake, 0) == everything["files_rewritten"] + outcome["files_rewritten"]
    assert SECRET.encode() not in every_byte(lake)
    assert len(read(lake / "events")) == 3


def test_the_ingest_erases_what_redis_is_done_with_once(lake: Path, redis_client) -> None:
    keys = Keys("busbar:", 4)
    said: list[str] = []
    keeper = Keeper(redis_client, keys, str(lake), erase_now=True, say=said.append)
    record = keys.catalog.erasure("er_1")
    match = json.dumps({"url": SECRET, "topics": None, "before": 10**13})
    redis_client.zadd(keys.catalog.erasures, {"er_1": 1})
    redis_client.hset(record, mapping={"state": "running", "match": match})
    keeper.tick(force=True)
    seen = json.loads(redis_client.hget(keys.catalog.lakes, keeper.lake))
    assert seen["path"] == str(lake) and seen["seen_at"] > 0
    assert keeper.erased == 0  # Redis not erased yet: rows could still arrive
    redis_client.hset(record, "redis_done_at", 10**13)
    keeper.begin("events")  # a micro-batch begun before redis_done_at holds it up
    assert keeper.erase_due() == 0
    keeper.end("events")
    assert keeper.erase_due() == 1
    done = json.loads(redis_client.hget(record, f"lake:{keeper.lake}"))
    assert (done["events"], done["attempts"]) == (3, 4) and done["at"] > 0
    assert keeper.erase_due() == 0  # once
    assert SECRET.encode() not in every_byte(lake)  # erase_now: vacuumed at once
    redis_client.hdel(record, f"lake:{keeper.lake}")  # as if killed before the HSET
    assert keeper.erase_due() == 1
    again = json.loads(redis_client.hget(record, f"lake:{keeper.lake}"))
    assert {k: again[k] for k in again if k != "at"} == {k: done[k] for k in done if k != "at"}
    assert len(said) == 2 and said[0].startswith("erasure er_1: 3 events, 4 attempts")
