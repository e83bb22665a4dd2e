"""ScrubQueues and ScrubWorkers: recover the jobs of dead workers, forget the long dead.

A worker thread's pending-list name is `<process>/<thread>`; the process heartbeats into
the `workers` hash. A process silent for BUSBAR_SCRUB_AFTER_MS (or absent) is dead: its
threads' jobs go back to the instant list and run again (at-least-once).
"""

from __future__ import annotations

import logging
import time

from jobs.context import JobContext

log = logging.getLogger(__name__)
FORGET_AFTER = 10  # x BUSBAR_SCRUB_AFTER_MS


def _beats(ctx: JobContext) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in ctx.redis.hgetall(ctx.keys.workers).items()}


def scrub_queues(ctx: JobContext, args: list, worker: str, job: bytes) -> bool:
    now = int(time.time() * 1000)
    beats = _beats(ctx)
    for queue in ctx.queues():
        for holder in queue.workers_holding():
            process = holder.split("/", 1)[0]
            if now - beats.get(process, 0) > ctx.settings.scrub_after_ms:
                moved = queue.scrub(holder)
                if moved:
                    log.warning(
                        "scrubbed %d job(s) of dead worker %s on %s", moved, holder, queue.name
                    )
    return False


def scrub_workers(ctx: JobContext, args: list, worker: str, job: bytes) -> bool:
    horizon = int(time.time() * 1000) - FORGET_AFTER * ctx.settings.scrub_after_ms
    dead = [w for w, beat in _beats(ctx).items() if beat < horizon]
    if dead:
        ctx.redis.hdel(ctx.keys.workers, *dead)
        log.info("forgot %d long-dead worker(s)", len(dead))
    return False
