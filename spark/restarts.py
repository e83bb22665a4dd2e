"""A Spark job run again when Spark could not start one of its Python workers.

Spark gives a Python worker it forks 10 s to connect back to the JVM (PythonWorkerFactory,
not configurable), and fails the query when it does not: `Python worker failed to
connect back`. On a loaded machine (two cores under a test suite, seen once in about
thirty `make test` runs) a worker importing PySpark and busbar's source can take longer.
Nothing was read or written by then, and a streaming query resumes from its checkpoint,
so the ingest is simply started again, at most RESTARTS times; any other failure is the
operator's to see at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
RESTARTS = 2
WORKER_LATE = "Python worker failed to connect back"

log = logging.getLogger(__name__)


def restarted(run: Callable[[], T], say: Callable[[str], None]) -> T:
    """`run()`, again when it failed only because a Python worker started too late."""
    for attempt in range(RESTARTS + 1):
        try:
            return run()
        except Exception as exc:  # Spark's StreamingQueryException, by its message
            if WORKER_LATE not in str(exc) or attempt == RESTARTS:
                raise
            say(f"a Spark Python worker started too late ({attempt + 1}): starting again")
    raise AssertionError("unreachable")  # the loop returns or raises
