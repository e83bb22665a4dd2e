"""The maintenance thread's loop (queue aux): acquire a job into its own pending list,
run it, settle it. Deliveries (queue main) run in the delivery engine instead
(app/delivery/engine.py).

The loop checks for shutdown only between jobs, so SIGTERM lets the job in hand finish
and be acknowledged or nacked. A Redis error (a lost reply included: nothing is ever
resent blindly) and a job found `lost` (this thread was taken for dead and scrubbed)
both end the same way: the thread gives back whatever its own pending list still holds
and carries on. Only a bug escapes the loop, and that stops the process.
"""

from __future__ import annotations

import logging
import threading

import redis

from app import codec
from app.clock import now_ms
from app.errors import JobLost, RetryableError
from app.lua import Scripts
from app.models.keys import AUX, keys_for
from app.models.queue import JobQueue
from app.redis_client import connect
from app.unblock import blocking_name
from config.settings import Settings
from jobs import JOBS
from jobs.context import JobContext

log = logging.getLogger(__name__)
DEFAULT_RETRY_MS = 1000


class JobRunner:
    """One thread on one queue (aux: maintenance jobs)."""

    def __init__(
        self,
        settings: Settings,
        queue: str,
        worker: str,
    ) -> None:
        client = connect(settings, timeout=settings.acquire_timeout + 10)
        # the blocking takes on a connection of their own, named: a stop ends them at once
        # (app/unblock.py), and never a command of a job the runner is finishing
        self._watch = connect(
            settings,
            timeout=settings.acquire_timeout + 10,
            name=blocking_name(worker.partition("/")[0]),
        )
        keys = keys_for(settings)
        self.ctx = JobContext(settings, client, keys, Scripts(client))
        self.queue = self.ctx.queue(queue, None if queue == AUX else 0)
        self.worker = worker
        self._dirty = True  # gives back anything left pending (a previous life) first

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                if self._dirty:
                    self.queue.scrub(self.worker)
                    self._dirty = False
                job = self.queue.acquire(
                    self.worker, self.ctx.settings.acquire_timeout, self._watch
                )
                if job is not None:
                    self._run(self.queue, job)
            except JobLost as exc:
                log.warning("%s: %s; moving on", self.worker, exc.message)
                self._dirty = True
            except redis.RedisError as exc:
                log.warning("%s: Redis error, retrying in 1 s: %s", self.worker, exc)
                self._dirty = True
                stop.wait(1)
        self._leave()

    def _leave(self) -> None:
        """Clean exit: nothing is pending, so the thread leaves the pending index."""
        try:
            self.queue.scrub(self.worker, forget=True)
        except redis.RedisError as exc:
            log.warning("%s: could not leave the pending index: %s", self.worker, exc)
        self.ctx.redis.close()
        self._watch.close()

    def _run(self, queue: JobQueue, job: bytes) -> None:
        name, args = codec.unpack_job(job)
        handler = JOBS.get(name)
        if handler is None:
            log.error("%s: unknown job %r dropped", self.worker, name)
            self._settle(queue, job, None)
            return
        try:
            settled = handler(self.ctx, args, self.worker, job)
        except (redis.RedisError, JobLost):
            raise
        except RetryableError as exc:
            log.info("%s: job retried in %d ms: %s", self.worker, exc.delay_ms, exc.message)
            self._settle(queue, job, now_ms() + exc.delay_ms)
            return
        except Exception:  # a job's own bug must not kill the thread: retry it later
            log.exception("%s: job %s failed", self.worker, name)
            self._settle(queue, job, now_ms() + DEFAULT_RETRY_MS)
            return
        if not settled:
            self._settle(queue, job, None)

    def _settle(self, queue: JobQueue, job: bytes, at: int | None) -> None:
        if not queue.settle(self.worker, job, now_ms(), at):
            raise JobLost("the job was scrubbed while it ran")
