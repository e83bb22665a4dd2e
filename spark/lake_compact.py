"""Compaction of the lake's tables: the small files of many micro-batches merged into few.

A running ingest commits a micro-batch every trigger, and each commit adds at least one
file per date: in a day of 10 s triggers, 8,640 files of a few kilobytes a table. Every
reader pays per file (a replay's Spark job lists and opens each one; an erasure's query
scans them all, since `url` and `key` have no statistics), so the ingest's keeper
compacts (spark/keeper.py): each date holding at least MIN_SMALL_FILES files under
TARGET_BYTES has them merged by delta-rs's `optimize.compact`, one commit per date. Files
at the target are never rewritten again, so a compaction costs the small files written
since the last one. The rows, their order and the micro-batches' transactions stay as
they were; a compaction commit changes no data (`dataChange: false`), so exactly-once
ingest, replay and erasure go on across it, and the files it replaces leave the disk at
the next vacuum, as an erasure's do. The new files' statistics leave out `url`, `key`,
`data` and `body` as the table's properties say (spark/delta.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from spark.delta import PARTITION, is_delta

MIN_SMALL_FILES = 16  # fewer small files in a date are left as they are
TARGET_BYTES = 128 * 1024 * 1024  # a compacted file's size, about
TABLES = ("events", "attempts")


def small_dates(path: str) -> list[str]:
    """The dates of the table holding at least MIN_SMALL_FILES files under the target."""
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    column = f"partition.{PARTITION}"
    if actions.num_rows == 0 or column not in actions.column_names:
        return []
    sizes = actions.column("size_bytes").to_pylist()
    dates = [str(d) for d in actions.column(column).to_pylist()]
    small = Counter(d for d, size in zip(dates, sizes, strict=True) if size < TARGET_BYTES)
    return sorted(d for d, n in small.items() if n >= MIN_SMALL_FILES)


def compact(output: str | Path) -> dict[str, int]:
    """Compact every date of both tables that has enough small files: the files removed
    and added."""
    done = {"files_removed": 0, "files_added": 0}
    for name in TABLES:
        path = f"{str(output).rstrip('/')}/{name}"
        if not is_delta(path):
            continue
        for day in small_dates(path):
            metrics = DeltaTable(path).optimize.compact(
                partition_filters=[(PARTITION, "=", day)], target_size=TARGET_BYTES
            )
            done["files_removed"] += int(metrics.get("numFilesRemoved") or 0)
            done["files_added"] += int(metrics.get("numFilesAdded") or 0)
    return done
