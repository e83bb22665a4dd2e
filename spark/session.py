"""The SparkSession busbar's jobs run in: Java found first, the `busbar` source registered.

Under `spark-submit` the JVM already runs and the master comes from the submit command,
so nothing is set up here; with a plain `python` process Spark's launcher starts the JVM
at the first session, after spark.java has made sure there is one. Without `master`,
Spark's own default applies: `local[*]`, or what spark-submit/spark-defaults say.
"""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from spark.java import ensure_java
from spark.source import BusbarDataSource


def submitted() -> bool:
    """Started by spark-submit (which hands its gateway to the Python driver)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def is_local(master: str | None) -> bool:
    return master is None or master.startswith("local")


def get_session(
    master: str | None = None, app_name: str = "busbar", conf: dict[str, str] | None = None
) -> SparkSession:
    """A session (the running one if any) in UTC, where `format("busbar")` works."""
    if not submitted():
        ensure_java(local=is_local(master))
    builder = SparkSession.builder.appName(app_name).config("spark.sql.session.timeZone", "UTC")
    if master:
        builder = builder.master(master)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def registered(spark: SparkSession) -> bool:
    """Whether the session knows `busbar` already (private JVM API; False when unsure)."""
    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
        return bool(manager.dataSourceExists(BusbarDataSource.name()))
    except Exception:  # Spark Connect or a changed internal API: registering again is harmless
        return False


def register(spark: SparkSession) -> None:
    """Registration is per session: a session passed in by a caller needs it too. Skipped
    when done, as registering again logs a warning about replacing the source."""
    if not registered(spark):
        spark.dataSource.register(BusbarDataSource)
