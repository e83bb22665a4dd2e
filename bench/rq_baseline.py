"""The job-queue benchmark's baseline: RQ on the same Redis, enqueue then SimpleWorker
processes in burst mode, timed from a common start barrier to the last worker's end so
that interpreter start-up is not counted against RQ (rq is only in the bench extra).
"""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any

import redis
from rq import Queue, SimpleWorker
from rq.registry import FailedJobRegistry

from bench import common

Result = tuple[float, float, float]  # jobs/s; Redis, client CPU microseconds per job
NOOP = "bench.rq_baseline.noop"  # by name, as RQ workers import it


def noop() -> None:
    """The RQ job: does nothing, so that only the queue's own cost is measured."""


def rq_worker(url: str, barrier: Any, ends: Any) -> None:
    """One RQ worker process: SimpleWorker in burst mode, without per-job log lines."""
    connection = redis.Redis.from_url(url)
    worker = SimpleWorker([Queue("bench", connection=connection)], connection=connection)
    barrier.wait()
    cpu = time.process_time()
    worker.work(burst=True, logging_level="WARNING")
    ends.put((time.time(), time.process_time() - cpu))


def rq_round(url: str, pid: int, jobs: int, workers: int) -> tuple[Result, Result]:
    """RQ's (enqueue, work) jobs/s and Redis CPU us/job."""
    connection = redis.Redis.from_url(url)
    queue = Queue("bench", connection=connection)
    started, cpu, mine = time.perf_counter(), common.cpu_seconds(pid), time.process_time()
    for _ in range(0, jobs, 1000):
        queue.enqueue_many([Queue.prepare_data(NOOP) for _ in range(1000)])
    redis_us = (common.cpu_seconds(pid) - cpu) / jobs * 1e6
    enqueue = (
        jobs / (time.perf_counter() - started),
        redis_us,
        (time.process_time() - mine) / jobs * 1e6,
    )
    ctx = mp.get_context("spawn")
    barrier, ends = ctx.Barrier(workers + 1), ctx.Queue()
    procs = [ctx.Process(target=rq_worker, args=(url, barrier, ends)) for _ in range(workers)]
    try:
        for proc in procs:
            proc.start()
        barrier.wait(60)
        start, cpu = time.time(), common.cpu_seconds(pid)
        done = [ends.get(timeout=120) for _ in procs]
        redis_us = (common.cpu_seconds(pid) - cpu) / jobs * 1e6
        work = (
            jobs / (max(at for at, _ in done) - start),
            redis_us,
            sum(c for _, c in done) / jobs * 1e6,
        )
    finally:
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
    failed = FailedJobRegistry(queue=queue).count
    if len(queue) or failed:
        raise RuntimeError(f"RQ left {len(queue)} queued and {failed} failed jobs")
    connection.close()
    return enqueue, work
