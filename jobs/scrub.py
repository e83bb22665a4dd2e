"""ScrubQueues and ScrubWorkers: recover the jobs of dead workers, forget the long dead.

A worker thread's pending-list name is `<process>/<thread>`; the process heartbeats into
the `workers` hash with Redis's clock. A process silent for BUSBAR_SCRUB_AFTER_MS by
that same clock (or absent) is dead: its threads' jobs go back to the instant list and
run again (at-least-once). The decision and the move are one script per holder
(`job_scrub.lua`), so a heartbeat that lands in between cannot be overtaken. A dead
worker that wakes up finds its jobs gone, and every transition it asks answers `lost`.
A delivery it had begun is on its subscriber's attempt log as `abandoned`, and a process
found dead with jobs in hand is told on `busbar_operations` (app/services/operations.py).
"""

from __future__ import annotations

import logging
from typing import Any

from app.clock import now_ms
from app.models import attempts, job_calls
from app.models.queue import by_process
from app.redis_client import text
from app.services import operations
from jobs.context import JobContext

log = logging.getLogger(__name__)
FORGET_AFTER = 10  # x BUSBAR_SCRUB_AFTER_MS


def scrub_queues(ctx: JobContext, args: list[Any], worker: str, job: bytes) -> bool:
    """Holders are grouped by process: a live process with thousands of delivery slots
    costs one script per queue, a dead one a script per SCRUB_CHUNK of its slots."""
    kept = attempts.kept(ctx.settings, now_ms())
    given_back: dict[str, int] = {}
    for queue in ctx.queues():
        for process, holders in by_process(queue.workers_holding()).items():
            moved = queue.scrub_many(process, holders, ctx.settings.scrub_after_ms, kept=kept)
            if moved > 0:
                log.warning(
                    "scrubbed %d job(s) of dead worker %s on %s", moved, process, queue.name
                )
                given_back[process] = given_back.get(process, 0) + moved
    for process, jobs in given_back.items():  # told once per scrub, all queues together
        operations.note_worker_dead(ctx.redis, ctx.keys, process, jobs)
    return False


def reach(ctx: JobContext) -> None:
    """Read what a scrub reads (every queue's pending index, on every node that holds
    one) and judge nothing: how the scrub ticker learns whether Redis is in reach while
    it waits to judge (workers/scheduler.py). Raises the Redis error when it is not."""
    for queue in ctx.queues():
        queue.workers_holding()


def scrub_workers(ctx: JobContext, args: list[Any], worker: str, job: bytes) -> bool:
    """Long-dead holders leave the pending index (after a last scrub), and their process
    the workers hash. A holder that comes back names itself again at its next acquire."""
    silence = FORGET_AFTER * ctx.settings.scrub_after_ms
    kept = attempts.kept(ctx.settings, now_ms())
    for queue in ctx.queues():
        for process, holders in by_process(queue.workers_holding()).items():
            queue.scrub_many(process, holders, silence, forget=True, kept=kept)
    forgotten = {
        text(process)
        for place in [ctx.keys.catalog, *ctx.keys.all_shards()]
        for process in ctx.redis.hkeys(place.workers)
        if ctx.scripts.run(job_calls.forget_worker(place, text(process), silence))
    }
    if forgotten:
        log.info("forgot %d long-dead worker(s)", len(forgotten))
    return False
