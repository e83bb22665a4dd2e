"""A Spark job run again when Spark's link to its Python side broke.

Spark gives a Python worker it forks 10 s to connect back to the JVM (PythonWorkerFactory,
not configurable), and fails the query when it does not: `Python worker failed to
connect back`; or the streaming source's Python runner finds its socket to the JVM
closed under it (EOFError, then BrokenPipeError, in python_streaming_source_runner.py).
Both were seen in make test on two loaded cores (a few times in about thirty runs).
A streaming query resumes from its checkpoint (what it committed stays, what it did not
is read again, exactly once), so the ingest is simply started again, at most RESTARTS
times; any other failure is the operator's to see at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
RESTARTS = 2
WORKER_LATE = "Python worker failed to connect back"
# the streaming source's Python runner whose socket to the JVM broke under it (the JVM
# gave up on it first): its traceback, carried in the query's failure, ends in these
RUNNER = "python_streaming_source_runner"
RUNNER_CUT = ("BrokenPipeError", "EOFError", "Broken pipe")

log = logging.getLogger(__name__)


def restarted(run: Callable[[], T], say: Callable[[str], None]) -> T:
    """`run()`, again when it failed only because Spark's link to its Python side broke
    (a Python worker that started too late, or the streaming source's runner cut off)."""
    for attempt in range(RESTARTS + 1):
        try:
            return run()
        except Exception as exc:  # Spark's StreamingQueryException, by its message
            if not plumbing(str(exc)) or attempt == RESTARTS:
                raise
            say(f"{why(str(exc))} ({attempt + 1}): starting again")
    raise AssertionError("unreachable")  # the loop returns or raises


def why(message: str) -> str:
    """What broke, for the operator's line (the two cases read alike otherwise)."""
    if WORKER_LATE in message:
        return "a Spark Python worker started too late"
    return "the streaming source's Python runner lost its link to the JVM"


def plumbing(message: str) -> bool:
    """Spark's link to its Python side failed, not the ingest's own work."""
    if WORKER_LATE in message:
        return True
    return RUNNER in message and any(cut in message for cut in RUNNER_CUT)
