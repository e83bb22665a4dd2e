"""Job-queue benchmark: busbar's JobQueue against RQ on the same Redis, in the same run.

Both sides move N distinct no-op jobs with 4 workers. busbar: 4 threads (as in `busbar
worker`, one Redis connection each), measured twice: each thread doing push -> acquire
-> ack of its own jobs (the whole life of a job), and acquire -> ack of N jobs pushed
beforehand (what RQ's timing covers). RQ: N jobs enqueued beforehand, then 4
`SimpleWorker` processes in burst mode (RQ workers run one job at a time, and processes
are how RQ scales), timed from a common start barrier to the last worker's end, so that
interpreter start-up is not counted against RQ.

    .venv/bin/python -m bench.jobqueue [--quick]
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import redis

from app.codec import pack_job
from app.lua import Scripts
from app.models.keys import Keys
from app.models.queue import JobQueue
from bench import common
from bench.rq_baseline import Result, rq_round
from dev import redis_server

ROUNDS, JOBS = 3, 10_000
QUICK_ROUNDS, QUICK_JOBS = 1, 2_000
WORKERS = 4
COMMAND = ".venv/bin/python -m bench.jobqueue"
RQ_ENQUEUE = "RQ: enqueue_many (1 thread, pipelined)"
RQ_WORK = "RQ: work (SimpleWorker x4 processes, burst)"


def now_ms() -> int:
    return int(time.time() * 1000)


def queue_for(url: str) -> JobQueue:
    """One client per thread, like each JobRunner in the worker process."""
    client = redis.Redis.from_url(url)
    return JobQueue(client, Keys(), Scripts(client), "main")


def run_threads(
    url: str, body: Callable[[JobQueue, str, int], float], pid: int, jobs: int, n: int = WORKERS
) -> Result:
    """n threads run body(queue, worker, index) after a common start; the time is from
    the start to the latest time a body reports (its last ack)."""
    barrier = threading.Barrier(n + 1)
    ends: list[float] = []

    def thread(t: int) -> None:
        queue, worker = queue_for(url), f"bench.{t}"
        barrier.wait()
        ends.append(body(queue, worker, t))
        queue.client.close()

    threads = [threading.Thread(target=thread, args=(t,), daemon=True) for t in range(n)]
    for one in threads:
        one.start()
    barrier.wait()
    start, cpu, mine = time.perf_counter(), common.cpu_seconds(pid), time.process_time()
    for one in threads:
        one.join(120)
    if len(ends) != n:
        raise RuntimeError("a busbar thread failed or did not finish in 120 s")
    check_empty(url)
    redis_us = (common.cpu_seconds(pid) - cpu) / jobs * 1e6
    return jobs / (max(ends) - start), redis_us, (time.process_time() - mine) / jobs * 1e6


def check_empty(url: str) -> None:
    """Every job was acknowledged: nothing left in the index, instant or pending lists."""
    client, place = redis.Redis.from_url(url), Keys().queue_place("main", 0)  # queue_for's
    left = client.scard(place.jobs_index("main")) + client.llen(place.jobs_instant("main"))
    left += sum(client.llen(place.jobs_pending("main", f"bench.{t}")) for t in range(WORKERS))
    client.close()
    if left:
        raise RuntimeError(f"{left} busbar jobs left unacknowledged")


def busbar_cycle(url: str, pid: int, jobs: int, n: int = WORKERS) -> Result:
    """Jobs/s, each of n threads doing push -> acquire -> ack of its own distinct jobs."""

    def body(queue: JobQueue, worker: str, t: int) -> float:
        for i in range(t, jobs, n):
            queue.push(pack_job("noop", [i]), now_ms())
            job = queue.acquire(worker, 1)
            if job is None or not queue.settle(worker, job, now_ms()):
                raise RuntimeError(f"job {i}: acquire or ack failed")
        return time.perf_counter()

    return run_threads(url, body, pid, jobs, n)


def busbar_drain(url: str, pid: int, jobs: int) -> Result:
    """Jobs/s, threads acquiring and acknowledging `jobs` jobs pushed beforehand."""
    queue = queue_for(url)
    for i in range(jobs):
        queue.push(pack_job("noop", [i]), now_ms())
    queue.client.close()

    def body(queue: JobQueue, worker: str, _: int) -> float:
        last = time.perf_counter()
        while (job := queue.acquire(worker, 0.2)) is not None:
            queue.settle(worker, job, now_ms())
            last = time.perf_counter()
        return last

    return run_threads(url, body, pid, jobs)


def report(runs: dict[str, list[Result]], others: str, quick: bool) -> str:
    """The markdown kept in bench/results/jobqueue.md."""
    rq = [rate for rate, _, _ in runs[RQ_WORK]]
    rounds, jobs = (QUICK_ROUNDS, QUICK_JOBS) if quick else (ROUNDS, JOBS)
    command = COMMAND + (" --quick" if quick else "")
    lines = [
        "# Job-queue benchmark",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        f"{jobs:,} distinct no-op jobs per round and side, {WORKERS} workers, one valkey "
        "server (pip wheel, no persistence) flushed before each measurement. Medians of "
        f"{rounds} round(s) (min-max); ratios are per round, against RQ's work rate.",
        "",
        "| what | jobs/s | x RQ work | Redis CPU us/job | client CPU us/job |",
        "|---|---|---|---|---|",
    ]
    for name, results in runs.items():
        rates, redis_us, client_us = zip(*results, strict=True)
        ratio = [a / b for a, b in zip(rates, rq, strict=True)]
        cells = [common.spread(rates), common.spread(ratio, "{:.1f}")]
        cells += [common.spread(redis_us), common.spread(client_us)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "busbar push + acquire + ack: each thread pushes a job (job_push.lua), acquires one "
        "(BLMOVE into its pending list) and acks it (job_settle.lua): 3 round trips per job. "
        "Acquire + ack: jobs pushed first (not timed). RQ work: jobs enqueued first "
        "(enqueue_many, pipelined; not timed in that row), 4 SimpleWorker processes in "
        "burst mode, default job options, logging at WARNING. Client CPU: the busbar "
        "threads' process, or the 4 RQ processes inside work(). Aim: busbar >= 5x RQ.",
        "",
        others,
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    quick = common.quick_flag("bench.jobqueue", __doc__, argv)
    rounds, jobs = (QUICK_ROUNDS, QUICK_JOBS) if quick else (ROUNDS, JOBS)
    cases: dict[str, Callable[[str, int, int], Result]] = {
        "busbar: push + acquire + ack (4 threads)": busbar_cycle,
        "busbar: acquire + ack of pre-pushed jobs (4 threads)": busbar_drain,
        "busbar: push + acquire + ack (1 thread, for the GIL's share)": partial(busbar_cycle, n=1),
    }
    runs: dict[str, list[Result]] = {name: [] for name in [*cases, RQ_ENQUEUE, RQ_WORK]}
    snap, started = common.others(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="busbar-bench-") as work:
        server = redis_server.start(Path(work) / "redis", persistent=False)
        try:
            client, pid = redis.Redis.from_url(server.url), server.process.pid
            for r in range(rounds):
                for name, case in cases.items():
                    client.flushdb()
                    runs[name].append(case(server.url, pid, jobs))
                client.flushdb()
                enqueue, rq_work = rq_round(server.url, pid, jobs, WORKERS)
                runs[RQ_ENQUEUE].append(enqueue)
                runs[RQ_WORK].append(rq_work)
                print(
                    f"round {r}: " + ", ".join(f"{k}: {v[-1][0]:,.0f}/s" for k, v in runs.items())
                )
            client.close()
        finally:
            server.stop()
    others = (
        f"Processes outside the benchmark used {common.others_since(snap):.1f} CPU-seconds "
        f"during its {time.perf_counter() - started:.0f} s."
    )
    common.write_report("jobqueue", report(runs, others, quick))
    keep_headlines(runs)


def keep_headlines(runs: dict[str, list[Result]]) -> None:
    """busbar's drain rate and its ratio to RQ's, per round, for BENCHMARKS.md."""
    drain = [rate for rate, _, _ in runs["busbar: acquire + ack of pre-pushed jobs (4 threads)"]]
    rq = [rate for rate, _, _ in runs[RQ_WORK]]
    ratio = [a / b for a, b in zip(drain, rq, strict=True)]
    common.write_headlines("jobqueue", [
        ("busbar acquire + ack, jobs/s (4 threads)", common.spread(drain)),
        ("RQ SimpleWorker x4, jobs/s", common.spread(rq)),
        ("busbar / RQ (acquire + ack vs work)", common.spread(ratio, "{:.1f}")),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
