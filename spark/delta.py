"""The lake's tables as Delta tables, written with delta-rs (the `deltalake` package).

Why Delta: an erasure must be able to delete one entity's rows, and Spark's streaming
file sink cannot (its `_spark_metadata` log trusts every file it wrote, forever). A Delta
table's log says which files are current, so a delete rewrites only the files holding the
rows and the log drops the old ones; vacuum then removes them from storage.

Why delta-rs rather than Delta's Spark jars: no jar is fetched at run time, and plain
Spark reads the table (the current files, listed here, as Parquet).

Exactly once: each micro-batch is committed with an application transaction
(`app_id`: the table and the checkpoint, `version`: the micro-batch id), in the same
commit as its files; a batch id the table already holds is skipped, so a rerun of a batch
after a crash between its commit and Spark's checkpoint adds nothing.

Column statistics: `url`, `key`, `data`, `source_data` and `body` are kept out of the log's min/max
(`delta.dataSkippingStatsColumns` lists the others): the log must not hold what an
erasure removes, and those columns are never filtered on by range anyway.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DateType, StructField, StructType

from spark.tables import Table

NO_STATS = ("url", "key", "data", "body", "source_data")  # never in the log's statistics
PARTITION = "date"
OLD_LOG = "_spark_metadata"  # the streaming file sink's log: a lake of the old layout
DELTA_LOG = "_delta_log"


def location(path: str | Path) -> str:
    """A lake path as the lake is known by: absolute when local, a URL as given."""
    text = str(path)
    return text.rstrip("/") if "://" in text else os.path.abspath(text)


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def app_id(table: Table, query_id: str) -> str:
    """The application transaction id of one table's query: per table and checkpoint,
    since each checkpoint numbers its micro-batches from 0. A checkpoint is known by its
    query's id (Spark keeps it in the checkpoint's `metadata`, the same on every restart),
    not by its path: a checkpoint deleted and begun again at the same path is another."""
    return f"busbar-ingest:{table.name}:{query_id}"


def spark_schema(table: Table) -> StructType:
    """The table's columns as written: the source's, and the `date` partition."""
    return StructType([*table.schema.fields, StructField(PARTITION, DateType(), True)])


def arrow_schema(table: Table) -> pa.Schema:
    return to_arrow_schema(spark_schema(table), timezone="UTC")


def configuration(table: Table) -> dict[str, str | None]:
    """The table properties: statistics for every column but NO_STATS (and the
    partition, whose values are in the log anyway)."""
    named = [f.name for f in table.schema.fields if f.name not in NO_STATS]
    return {"delta.dataSkippingStatsColumns": ",".join(named)}


def is_delta(path: str | Path) -> bool:
    return DeltaTable.is_deltatable(str(path))


def is_old_layout(path: str | Path) -> bool:
    """A table the streaming file sink wrote and `busbar spark migrate` has not converted
    (local paths only: a remote one is not looked at)."""
    text = str(path)
    if "://" in text:
        return False
    return (Path(text) / OLD_LOG).is_dir() and not (Path(text) / DELTA_LOG).is_dir()


def ensure(path: str | Path, table: Table) -> DeltaTable:
    """The table, created empty (schema, partition, properties) when there is none, so
    readers find it before the first micro-batch."""
    if not is_delta(path):
        DeltaTable.create(
            str(path), arrow_schema(table), mode="ignore", partition_by=[PARTITION],
            configuration=configuration(table),
        )  # fmt: skip
    return DeltaTable(str(path))


def committed(path: str | Path, app: str) -> int | None:
    """The last micro-batch id `app` committed to the table, None when none."""
    return DeltaTable(str(path)).transaction_version(app)


def commit_batch(path: str | Path, table: Table, data: pa.Table, app: str, batch_id: int) -> bool:
    """Append one micro-batch's rows with its transaction; False when the table already
    holds that batch (or a later one) of `app`: nothing is written."""
    done = committed(path, app)
    if done is not None and done >= batch_id:
        return False
    props = CommitProperties(app_transactions=[Transaction(app, batch_id)])
    rows = data.cast(arrow_schema(table))
    # "merge": a table made by an earlier release gains the columns added since
    # (source_data); their rows read them as null
    write_deltalake(str(path), rows, mode="append", partition_by=[PARTITION],
                    commit_properties=props, schema_mode="merge")  # fmt: skip
    return True


def current_files(path: str | Path) -> list[str]:
    """The table's current data files, as paths under `path` as given (an s3a:// lake
    stays s3a://, which Spark's Hadoop file systems read)."""
    actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
    base = str(path).rstrip("/")
    return [f"{base}/{unquote(p)}" for p in actions.column("path").to_pylist()]
