"""A worker thread's loop: acquire a job into its own pending list, run it, settle it.

The loop checks for shutdown only between jobs, so SIGTERM lets the job in hand finish
(a delivery is bounded by its HTTP timeouts) and be acknowledged or nacked. A Redis
outage is waited out; only a bug escapes the loop, and that stops the process.
"""

from __future__ import annotations

import logging
import threading
import time

import redis

from app import codec
from app.errors import RetryableError
from app.lua import Scripts
from app.models.keys import Keys
from app.redis_client import connect
from app.services.callback_http import callback_session
from config.settings import Settings
from jobs import JOBS
from jobs.context import JobContext

log = logging.getLogger(__name__)
DEFAULT_RETRY_MS = 1000


class JobRunner:
    def __init__(self, settings: Settings, queue: str, worker: str) -> None:
        client = connect(settings, timeout=settings.acquire_timeout + 10)
        # trust_env off and the address check on: see app/services/callback_http.py
        session = callback_session(allow_link_local=settings.allow_link_local_callbacks)
        self.ctx = JobContext(settings, client, Keys(settings.key_prefix), Scripts(client), session)
        self.queue = self.ctx.queue(queue)
        self.worker = worker
        self._dirty = True  # registers, and gives back anything left pending, before acquiring

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                if self._dirty:
                    self.queue.scrub(self.worker)
                    self.queue.register(self.worker)
                    self._dirty = False
                job = self.queue.acquire(self.worker, self.ctx.settings.acquire_timeout)
                if job is not None:
                    self._run(job)
            except redis.RedisError as exc:
                log.warning("%s: Redis error, retrying in 1 s: %s", self.worker, exc)
                self._dirty = True
                stop.wait(1)
        self.ctx.session.close()

    def _run(self, job: bytes) -> None:
        name, args = codec.unpack_job(job)
        handler = JOBS.get(name)
        if handler is None:
            log.error("%s: unknown job %r dropped", self.worker, name)
            self.queue.ack(self.worker, job)
            return
        try:
            settled = handler(self.ctx, args, self.worker, job)
        except redis.RedisError:
            raise
        except RetryableError as exc:
            self._nack(job, exc.delay_ms, exc.message)
            return
        except Exception:  # a job's own bug must not kill the thread: retry it later
            log.exception("%s: job %s failed", self.worker, name)
            self._nack(job, DEFAULT_RETRY_MS, "error")
            return
        if not settled:
            self.queue.ack(self.worker, job)

    def _nack(self, job: bytes, delay_ms: int, why: str) -> None:
        log.info("%s: job retried in %d ms: %s", self.worker, delay_ms, why)
        self.queue.nack(self.worker, job, int(time.time() * 1000) + delay_ms)
