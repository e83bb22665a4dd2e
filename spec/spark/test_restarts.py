"""spark/restarts.py: an ingest whose link to its Python side broke (a Python worker
that started too late, the streaming source's runner cut off) is started again
(at most twice), and any other failure reaches the operator at once."""

from __future__ import annotations

import pytest

from spark.restarts import RESTARTS, RUNNER, WORKER_LATE, restarted


class Flaky:
    def __init__(self, failures: list[str]) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise RuntimeError(self.failures.pop(0))
        return "ingested"


def test_a_worker_that_started_too_late_is_tried_again_and_said():
    said: list[str] = []
    run = Flaky([f"[STREAM_FAILED] Query terminated with exception: {WORKER_LATE}. SQLSTATE"])
    assert restarted(run, said.append) == "ingested"
    assert run.calls == 2 and len(said) == 1 and "started too late" in said[0]


def test_a_runner_cut_off_is_tried_again_and_said_as_such():
    said: list[str] = []
    cut = f"{RUNNER}.py, line 9, in main\nBrokenPipeError: [Errno 32] Broken pipe"
    run = Flaky([f"[STREAM_FAILED] Query terminated with exception: {cut}"])
    assert restarted(run, said.append) == "ingested"
    assert run.calls == 2 and "runner lost its link" in said[0] and "too late" not in said[0]


def test_another_failure_and_a_worker_late_every_time_are_raised():
    other = Flaky(["[STREAM_FAILED] Redis refused the connection"])
    with pytest.raises(RuntimeError, match="Redis refused"):
        restarted(other, lambda _: None)
    assert other.calls == 1
    always = Flaky([WORKER_LATE] * (RESTARTS + 1))
    with pytest.raises(RuntimeError, match=WORKER_LATE):
        restarted(always, lambda _: None)
    assert always.calls == RESTARTS + 1


def test_a_streaming_source_runner_cut_from_the_jvm_is_tried_again():
    """The second shape of the same failure (fresh-clone make test, 0c8f9e8): the query's
    message carries the runner's traceback, EOFError then BrokenPipeError. An error of
    the source's own (a traceback in the runner without a cut socket) is not."""
    cut = ('File ".../pyspark/sql/streaming/python_streaming_source_runner.py", line 265\n'
           "EOFError\nBrokenPipeError: [Errno 32] Broken pipe")  # fmt: skip
    run = Flaky([f"[STREAM_FAILED] Query terminated with exception: {cut}"])
    assert restarted(run, lambda _: None) == "ingested" and run.calls == 2
    own = Flaky(['File ".../python_streaming_source_runner.py"\nValueError: bad offset'])
    with pytest.raises(RuntimeError, match="bad offset"):
        restarted(own, lambda _: None)
    assert own.calls == 1
