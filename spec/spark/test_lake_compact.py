"""Compaction of the lake (spark/lake_compact.py), on real Delta tables without a JVM:
the small files of many micro-batches merged per date, the rows and the micro-batches'
transactions as they were, nothing of an erasable column in the log, and an erasure
after it exact."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from app.models.keys import Keys
from spark import delta, lake_compact, lake_erase
from spark.keeper import Keeper
from spark.tables import EVENTS
from spec.spark.test_lake_delta import event, every_byte, rows

SECRET = "https://people.test/compacted"
BUSY, QUIET = date(2026, 1, 1), date(2026, 1, 2)


def batches(path: Path, busy: int, quiet: int) -> list[dict]:
    """`busy` micro-batches on BUSY, then `quiet` on QUIET: a file each, 3 rows each, the
    first row of every busy batch SECRET's."""
    delta.ensure(path, EVENTS)
    written = []
    for n in range(busy + quiet):
        day = BUSY if n < busy else QUIET
        items = [{**event(3 * n + i, SECRET if i == 0 and n < busy else f"https://x.test/{n}",
                          batch=n), "position": i, "date": day}
                 for i in range(3)]  # fmt: skip
        delta.commit_batch(path, EVENTS, rows(EVENTS, items), "app", n)
        written += items
    return written


def files_by_date(path: Path) -> dict[str, int]:
    actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
    days = [str(d) for d in actions.column("partition.date").to_pylist()]
    return {d: days.count(d) for d in sorted(set(days))}


def current(path: Path) -> list[tuple]:
    table = pa.table(DeltaTable(str(path)).to_pyarrow_table())
    return sorted((r["stream_id"], r["position"], r["url"], r["data"]) for r in table.to_pylist())


def test_a_busy_date_is_merged_and_nothing_else_changes(tmp_path: Path) -> None:
    path = tmp_path / "lake" / "events"
    written = batches(path, busy=30, quiet=lake_compact.MIN_SMALL_FILES - 1)
    before = current(path)
    assert files_by_date(path) == {str(BUSY): 30, str(QUIET): 15}

    done = lake_compact.compact(tmp_path / "lake")
    assert done == {"files_removed": 30, "files_added": 1}
    assert files_by_date(path) == {str(BUSY): 1, str(QUIET): 15}  # the quiet date left be
    assert current(path) == before and len(before) == len(written)
    assert lake_compact.compact(tmp_path / "lake") == {"files_removed": 0, "files_added": 0}

    # exactly once across it: the micro-batches' transactions are still in the table
    assert delta.committed(path, "app") == 44
    assert delta.commit_batch(path, EVENTS, rows(EVENTS, written[-3:]), "app", 44) is False
    log = b"".join(p.read_bytes() for p in (path / "_delta_log").glob("*.json"))
    assert SECRET.encode() not in log  # the merged file's statistics leave out url

    # the replaced files leave the disk at the vacuum, and an erasure after it is exact
    assert lake_erase.vacuum(tmp_path / "lake", 0) == 30
    erasure = lake_erase.Erasure("er_c", "url", SECRET, (), 10**13, "running", 1)
    outcome = lake_erase.erase(tmp_path / "lake", erasure)
    assert (outcome["events"], outcome["files_rewritten"]) == (30, 1)
    assert lake_erase.erase(tmp_path / "lake", erasure) == outcome
    lake_erase.vacuum(tmp_path / "lake", 0)
    assert SECRET.encode() not in every_byte(tmp_path / "lake")
    assert len(current(path)) == len(written) - 30


def test_the_keeper_compacts_at_its_start(tmp_path: Path, redis_client) -> None:
    lake = tmp_path / "lake"
    batches(lake / "events", busy=lake_compact.MIN_SMALL_FILES, quiet=0)
    said: list[str] = []
    keeper = Keeper(redis_client, Keys("busbar:", 4), str(lake), say=said.append)
    keeper.tick(force=True)
    assert files_by_date(lake / "events") == {str(BUSY): 1}
    assert said == [f"compacted: {lake_compact.MIN_SMALL_FILES} small files into 1"]
    keeper.tick()  # not due again for VACUUM_EVERY_S
    assert said == [f"compacted: {lake_compact.MIN_SMALL_FILES} small files into 1"]
