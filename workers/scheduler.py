"""The scheduler (due scheduled jobs -> instant) and the tickers (periodic aux jobs)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis

from app import codec
from app.clock import now_ms
from app.lua import Scripts
from app.models.keys import keys_for
from app.models.queue import AUX, MAIN, JobQueue, promote_all, script_groups
from app.redis_client import connect
from app.unblock import blocking_name
from config.settings import Settings
from jobs import scrub
from jobs.context import JobContext

log = logging.getLogger(__name__)
# A scheduler sleeps until the earliest job it knows of is due, woken by the bell when an
# earlier one is scheduled (app/lua/lib/jobs.lua's job_ring); and promotes at least this
# often whatever it heard: a bell rung by no one (a `busbar web` of the release before,
# in a rolling upgrade) or taken by another worker's scheduler that then died.
WAKE_AT_MOST_S = 0.25
# Redis ends a blocked wait late: 43 ms seen under load, and an idle server may notice a
# timeout only at its next cron tick (every 100 ms at the default hz 10). The last NEAR_S
# before a job is due are waited by the process's own clock, looking again every
# NEAR_EVERY_S, so a batch leaves within a few ms of its timeout, as when the scheduler
# polled every 10 ms.
NEAR_S, NEAR_EVERY_S = 0.1, 0.01
OPERATIONS_EVERY_S = 1.0  # how late an operational event reaches busbar_operations, at most


class Scheduler:
    """Promotes the due jobs of its queues: on a single Redis every shard's main and the
    aux, in one script; on a cluster one shard's main or the aux, a scheduler each (a
    thread of its own: its bell is in its own slot)."""

    def __init__(self, queues: list[JobQueue], bells: redis.Redis, wake_at_most_s: float) -> None:
        self.queues = queues
        self._bells = bells
        self._bell_keys = [q.place.jobs_schedule_bell(q.name) for q in queues]
        self._wake_at_most_s = wake_at_most_s

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                now = now_ms()
                next_at = promote_all(self.queues, now)
                wait = self._wake_at_most_s
                if next_at is not None:
                    wait = min(wait, max(next_at - now, 1) / 1000)
                if wait > NEAR_S:  # on the bell, woken early by a job scheduled sooner
                    self._bells.blpop(self._bell_keys, timeout=wait - NEAR_S)
                else:  # by the process's own clock, as Redis may end a block late
                    stop.wait(min(wait, NEAR_EVERY_S))
            except redis.RedisError as exc:
                log.warning("scheduler: %s", exc)
                stop.wait(1)


def schedulers(
    settings: Settings, worker_id: str, wake_at_most_s: float = WAKE_AT_MOST_S
) -> list[Scheduler]:
    """The worker's schedulers, whose blocked waits on the bells a stop ends at once
    (their connections carry the worker's name: app/unblock.py)."""
    client = connect(settings)
    keys, scripts = keys_for(settings), Scripts(client)
    mains = [JobQueue(client, keys, scripts, MAIN, n) for n in range(keys.shards)]
    bells = connect(settings, timeout=wake_at_most_s + 10, name=blocking_name(worker_id))
    groups = script_groups([*mains, JobQueue(client, keys, scripts, AUX, None)])
    return [Scheduler(group, bells, wake_at_most_s) for group in groups]


class Ticker:
    """Pushes one aux job every `every_s`; uniqueness keeps a slow job from piling up."""

    def __init__(self, settings: Settings, job: str, every_s: float) -> None:
        client = connect(settings)
        self.queue = JobQueue(client, keys_for(settings), Scripts(client), AUX, None)
        self.job = codec.pack_job(job, [])
        self.every = every_s

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.every):
            try:
                self.queue.push(self.job, now_ms())
            except redis.RedisError as exc:
                log.warning("ticker: %s", exc)


class ScrubTicker:
    """Runs ScrubQueues itself every `every_s`, in every worker, instead of queueing it.

    ScrubQueues gives back the jobs of dead workers, so it must not be a job a dead
    worker can hold: killed while running it, a worker left it in its pending list, job
    uniqueness turned every later push into a no-op, and no job of any dead worker came
    back again. Several workers scrubbing at once is harmless: each dead worker's list
    is emptied by one atomic script, and the second scrub finds nothing.

    It judges only after a whole scrub window of unbroken contact with Redis. While
    Redis was away (down, restarting, loading, out of reach) no heartbeat could land,
    so right after it returns every worker looks silent; the live ones need a window to
    beat again. Counting that window from the first error instead of from the return
    scrubbed a live worker whenever an outage lasted about a window (the soak's kill -9
    of Redis, down 3.1 s with a 3 s window: a batch sent twice at once). A worker just
    started has watched nothing yet, so it too waits a window before its first judgment.
    """

    def __init__(
        self, settings: Settings, every_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        client = connect(settings)
        self.ctx = JobContext(settings, client, keys_for(settings), Scripts(client))
        self.every = every_s
        self.window_s = settings.scrub_after_ms / 1000
        self.clock = clock
        self.reached_since: float | None = clock()

    def step(self) -> bool:
        """One tick: reach every queue, and scrub once contact has lasted a window.
        Returns whether it judged."""
        try:
            if self.reached_since is None or self.clock() - self.reached_since < self.window_s:
                scrub.reach(self.ctx)
                if self.reached_since is None:
                    self.reached_since = self.clock()
                return False
            scrub.scrub_queues(self.ctx, [], "ticker", b"")
            return True
        except redis.RedisError as exc:
            self.reached_since = None
            log.warning("scrub_queues: %s", exc)
            return False

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.every):
            self.step()


def tickers(settings: Settings) -> dict[str, Ticker | ScrubTicker]:
    every = settings.scrub_after_ms / 1000
    return {
        "scrub_queues": ScrubTicker(settings, every / 3),
        "scrub_workers": Ticker(settings, "scrub_workers", every),
        "monitor": Ticker(settings, "monitor", settings.monitor_interval),
        "expire": Ticker(settings, "expire", settings.expire_interval),
        "autodrop": Ticker(settings, "autodrop", settings.autodrop_interval),
        "operations": Ticker(settings, "operations", OPERATIONS_EVERY_S),
    }
