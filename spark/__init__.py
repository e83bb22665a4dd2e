"""The delivery log and the attempt stream as a PySpark data source, the lake they are
ingested into, and replay from it. Takes from app only what reads the same bytes and
times (spec/test_layout.py).

Modules (docs/layout.md is the whole map; spec/test_map.py keeps both true):

    attempt_rows.py     the attempts table's schema and rows
    cli.py              `busbar spark ...`
    connect.py          Redis connections for the driver and each reader task
    delta.py            the lake's tables as Delta tables (delta-rs): written once, read back
    erased.py           what erasures took out of the streams, read in their place
    errors.py           the Spark side's errors, apart from app.errors
    ingest.py           `busbar spark ingest`: the streams into the Delta lake
    java.py             a JVM found before the first SparkSession
    keeper.py           the ingest's upkeep: its lake registered, erasures done, vacuum
    lake.py             reading the lake back
    lake_compact.py     the small files of many micro-batches merged
    lake_erase.py       one entity's rows deleted from the lake's tables
    lake_retention.py   the lake's rows past their payload retention deleted
    migrate.py          `busbar spark migrate`: a Parquet lake made Delta in place
    offsets.py          positions in the streams, and where reading starts
    options.py          the data source's options
    progress.py         a line per micro-batch: rows, seconds, lag
    ranges.py           where each read starts and ends; one range read
    replay.py           `busbar spark replay`
    replay_args.py      its arguments, parsed without PySpark
    restarts.py         a job started again when its link to Python broke
    rows.py             the events table's schema and rows
    selection.py        which lake events a replay takes
    session.py          the SparkSession, the source registered
    source.py           the `busbar` data source
    stream.py           the streaming reader's micro-batches
    submit.py           the entry script for spark-submit
    tables.py           the lake's tables, one stream per shard each
    watch.py            waiting on the ingest's queries without cutting a py4j call
"""
