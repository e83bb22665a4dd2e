"""`busbar spark migrate`: a lake of the Parquet layout (Spark's streaming file sink, with
its `_spark_metadata` log) made a Delta table in place (spark/delta.py), without copying.

The files stay where they are; a Delta log is written beside them that lists exactly the
files `_spark_metadata` lists (a file the sink wrote for a batch that never committed is
left out, as the sink's readers left it out), with the sink's last batch id recorded as
the ingest's application transaction for that table and checkpoint. So the next ingest,
resuming from the same checkpoint, skips a batch the sink had committed but the
checkpoint had not (the crash case), and adds every later one once. `_spark_metadata`
is then renamed `_spark_metadata.migrated`: plain Spark reading the directory would
otherwise trust it and miss every later file.

Each step looks at what is there first, so a migration cut short and run again finishes
it, and a lake already migrated is left as it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.transaction import AddAction, RemoveAction

from spark import delta
from spark.errors import LakeLayoutError
from spark.ingest import checkpoint_of
from spark.tables import TABLES, Table

MIGRATED = "_spark_metadata.migrated"


@dataclass(frozen=True)
class SinkLog:
    """What the file sink's log says: its current files (absolute paths) and last batch."""

    files: list[str]
    last_batch: int | None


def sink_log(table_dir: Path) -> SinkLog:
    """Every batch file and compaction of `_spark_metadata`, adds less deletes."""
    log_dir = table_dir / delta.OLD_LOG
    added: dict[str, None] = {}
    last = None
    for entry in sorted(log_dir.iterdir(), key=lambda p: p.name):
        name = entry.name.removesuffix(".compact")
        if not name.isdigit():
            continue  # .crc files and the like
        last = max(last or 0, int(name))
        for line in entry.read_text().splitlines()[1:]:  # the first line is the version
            if not line.strip():
                continue
            item = json.loads(line)
            path = unquote(urlparse(item["path"]).path)
            if item.get("action", "add") == "delete":
                added.pop(path, None)
            else:
                added[path] = None
    return SinkLog(list(added), last)


def add_action(table_dir: Path, path: str) -> AddAction:
    file = Path(path)
    relative = file.relative_to(table_dir.resolve()).as_posix()
    values = dict(p.split("=", 1) for p in Path(relative).parent.parts if "=" in p)
    stats = json.dumps({"numRecords": pq.read_metadata(file).num_rows})
    stat = file.stat()
    return AddAction(relative, stat.st_size, values, int(stat.st_mtime * 1000), True, stats)


def migrate_table(table_dir: Path, table: Table, app: str | None) -> str:
    """One table to Delta, as the module docstring says; what was done, in a few words."""
    if not (table_dir / delta.OLD_LOG).is_dir():
        return "already Delta" if delta.is_delta(table_dir) else "no table"
    found = sink_log(table_dir)
    delta.ensure(table_dir, table)
    done = DeltaTable(str(table_dir))
    if found.files and not done.file_uris():  # added in one commit, with the transaction
        actions: list[AddAction | RemoveAction] = [add_action(table_dir, f) for f in found.files]
        txn = [] if app is None or found.last_batch is None else [
            Transaction(app, found.last_batch)]  # fmt: skip
        props = CommitProperties(app_transactions=txn)
        schema = delta.arrow_schema(table)
        done.create_write_transaction(
            actions, "append", schema, partition_by=[delta.PARTITION], commit_properties=props
        )
    (table_dir / delta.OLD_LOG).rename(table_dir / MIGRATED)
    return f"{len(found.files)} files, to batch {found.last_batch}"


def query_id(checkpoint: str) -> str | None:
    """The id of the query a checkpoint is of (its `metadata`), None before any."""
    metadata = Path(checkpoint) / "metadata"
    if not metadata.is_file():
        return None
    return str(json.loads(metadata.read_text().splitlines()[0])["id"])


def migrate(output: str | Path, checkpoint: str | Path) -> dict[str, str]:
    """Every table of the lake at `output` (local only), with its checkpoint's app id
    (none when the checkpoint is gone: the next ingest then reads the streams again)."""
    if "://" in str(output) or "://" in str(checkpoint):
        raise LakeLayoutError("busbar spark migrate converts a local lake only")
    done = {}
    for name, table in TABLES.items():
        query = query_id(checkpoint_of(checkpoint, table))
        app = None if query is None else delta.app_id(table, query)
        done[name] = migrate_table(Path(output).resolve() / name, table, app)
    return done
