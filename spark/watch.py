"""Waiting on the ingest's streaming queries (one per lake table) without ever cutting a
py4j call in half: short waits, between which a stop asked for from outside (a signal,
recorded by the CLI) and each query's progress are looked at.

With an availableNow trigger every query ends by itself once it has read what its
streams held, so the wait is for all of them. With an interval they run until stopped:
one that ends (stopped from outside, or failed) ends the run, and the caller stops the
others, so a table never goes on being written alone while the command seems to run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol, cast

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark.progress import Printer, ProgressLines

POLL_S = 0.5


class Stop(Protocol):
    """A stop asked for from outside (signals, in the CLI): once, after the micro-batch in
    progress; urgently, now."""

    @property
    def requested(self) -> bool: ...

    @property
    def urgent(self) -> bool: ...


def stopping(spark: SparkSession, queries: Sequence[StreamingQuery], stop: Stop) -> bool:
    """Whether to stop the queries now. A batch stopped half-way makes Spark log a page of
    Java InterruptedException, so a plain request waits for the batches in progress; an
    urgent one stops at once. Either way Spark's warnings about the jobs it cancels are
    expected then, and turned off."""
    if stop.urgent:
        spark.sparkContext.setLogLevel("OFF")
        return True
    if any(q.isActive and q.status["isTriggerActive"] for q in queries):
        return False
    spark.sparkContext.setLogLevel("ERROR")
    return True


def finished(queries: Sequence[StreamingQuery], until_all: bool) -> bool:
    """All ended; or, unless `until_all`, any (failed ones always end the run)."""
    ended = [q for q in queries if not q.isActive]
    if len(ended) == len(queries):
        return True
    return bool(ended) and (not until_all or any(q.exception() is not None for q in ended))


def watch(
    spark: SparkSession,
    watched: Sequence[tuple[StreamingQuery, ProgressLines | None]],
    until_all: bool,
    deadline: float | None,
    stop: Stop | None,
    on_progress: Printer | None,
    tick: Callable[[], None] | None = None,
) -> None:
    """Wait for the queries in short waits rather than one long one: a stop request is
    seen within POLL_S, and no py4j call is ever interrupted half-way. Returns when
    `finished` says so, the deadline passes or it is time to stop; the caller stops
    whatever still runs. `tick`, when given, is called between waits."""
    queries = [query for query, _ in watched]
    told = False
    while not finished(queries, until_all):
        # a query may end between `finished` and here: then the loop looks again
        active = next((q for q in queries if q.isActive), None)
        if active is None:
            continue
        # PySpark types the timeout as int; it takes seconds with a fraction (x 1000)
        active.awaitTermination(cast(int, POLL_S))
        for query, lines in watched:
            if lines:
                lines.report(query.recentProgress)
        if tick is not None:  # the lake's upkeep, between waits (spark/keeper.py)
            tick()
        if deadline and time.monotonic() > deadline:
            return
        if stop and stop.requested:
            if not told and on_progress:
                on_progress("stopping after the micro-batch in progress (again: stop now)")
            told = True
            if stopping(spark, queries, stop):
                return
