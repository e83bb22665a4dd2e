"""A worker thread's loop: acquire a job into its own pending list, run it, settle it.

The loop checks for shutdown only between jobs, so SIGTERM lets the job in hand finish
(a delivery is bounded by its total deadline) and be acknowledged or nacked. A Redis
error (a lost reply included: nothing is ever resent blindly) and a job found `lost`
(this thread was taken for dead and scrubbed) both end the same way: the thread gives
back whatever its own pending list still holds and carries on. Only a bug escapes the
loop, and that stops the process.
"""

from __future__ import annotations

import logging
import threading
import time

import redis

from app import codec
from app.errors import JobLost, RetryableError
from app.lua import Scripts
from app.models.keys import MAIN, keys_for
from app.models.queue import JobQueue, take_first
from app.redis_client import connect
from app.services.callback_http import Timeouts, callback_client
from app.services.deadline import Deadlines
from app.services.deliver import Flight, Outcome, Taken
from config.settings import Settings
from jobs import JOBS, batch
from jobs.context import JobContext
from workers.doorbell import Doorbell

log = logging.getLogger(__name__)
DEFAULT_RETRY_MS = 1000


def now_ms() -> int:
    return int(time.time() * 1000)


class JobRunner:
    """One worker thread. On `main` it serves every shard: after each job it sweeps them
    for a due job, starting one shard further each time (fair between shards); when all
    are empty it waits as the process's doorbell arranges: one thread per shard blocks
    on it in Redis, so a job on any shard wakes one at once (no polling), and the rest
    wait in the process until a thread that found work rings."""

    def __init__(
        self,
        settings: Settings,
        queue: str,
        worker: str,
        deadlines: Deadlines | None = None,
        doorbell: Doorbell | None = None,
    ) -> None:
        client = connect(settings, timeout=settings.acquire_timeout + 10)
        deadlines = deadlines or Deadlines()
        # the address check, timeouts and the total deadline: see callback_http.py
        http = callback_client(
            allow_link_local=settings.allow_link_local_callbacks,
            refused=settings.callback_deny,
            deadlines=deadlines,
            verify=settings.callback_verify,
            timeouts=Timeouts(settings.connect_timeout, settings.timeout),
        )
        keys = keys_for(settings)
        self.ctx = JobContext(settings, client, keys, Scripts(client), http, deadlines)
        self.queues = self.ctx.queues(queue)
        # the threads of a process share one; aux is one queue with its own thread
        self.doorbell = (doorbell or Doorbell(len(self.queues))) if queue == MAIN else None
        self._turn = self.doorbell.first if self.doorbell else 0
        self._sweeps = True  # whether the next _take sweeps before it waits
        self.worker = worker
        self._dirty = True  # gives back anything left pending (a previous life) first
        self._delivery = batch.delivery(self.ctx) if queue == MAIN else None
        self._handed: Taken | None = None  # the next job, taken by the last ack

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                if self._dirty:
                    self._handed = None  # given back with the rest
                    for queue in self.queues:
                        queue.scrub(self.worker)
                    self._dirty = False
                found = self._take()
                if found is not None:
                    self._run(*found)
            except JobLost as exc:
                log.warning("%s: %s; moving on", self.worker, exc.message)
                self._dirty = True
            except redis.RedisError as exc:
                log.warning("%s: Redis error, retrying in 1 s: %s", self.worker, exc)
                self._dirty = True
                stop.wait(1)
        self._leave()

    def _take(self) -> Taken | None:
        """On `main`: sweep every shard, from the next one in turn, then wait as the
        doorbell arranges (workers/doorbell.py): watching a shard in Redis, or rung. A
        thread that was not rung and watches nothing asks Redis nothing. Whoever takes a
        job rings, so one more thread comes to sweep. On `aux`: wait on its one queue."""
        timeout = self.ctx.settings.acquire_timeout
        if self.doorbell is None:
            queue = self.queues[0]
            job = queue.acquire(self.worker, timeout)
            return None if job is None else (queue, job, None)
        found, self._handed = self._handed, None
        if found is None and self._sweeps:
            found = self._sweep(self._in_turn())
        self._sweeps = True
        if found is None:
            shard = self.doorbell.claim()
            if shard is None:
                self._sweeps = self.doorbell.wait(timeout)
                return None  # rung or not, the loop goes on after checking for a stop
            try:
                job = self.queues[shard].acquire(self.worker, timeout)
            finally:
                self.doorbell.release(shard)  # before the ring: the next thread watches
            found = None if job is None else (self.queues[shard], job, None)
        if found is not None:
            self.doorbell.ring()
        return found

    def _in_turn(self) -> list[JobQueue]:
        """The queues in the order of this sweep: one shard further each time."""
        start, self._turn = self._turn, (self._turn + 1) % len(self.queues)
        return [*self.queues[start:], *self.queues[:start]]

    def _sweep(self, queues: list[JobQueue]) -> Taken | None:
        """The first job found; on `main`, with its delivery begun in the same step."""
        if self._delivery is not None:
            return self._delivery.take(queues, self.worker)
        found = take_first(queues, self.worker)
        return None if found is None else (*found, None)

    def _leave(self) -> None:
        """Clean exit: nothing is pending, so the thread leaves the pending indexes."""
        try:
            for queue in self.queues:
                queue.scrub(self.worker, forget=True)
        except redis.RedisError as exc:
            log.warning("%s: could not leave the pending index: %s", self.worker, exc)
        self.ctx.http.close()

    def _run(self, queue: JobQueue, job: bytes, begun: Flight | Outcome | None) -> None:
        name, args = codec.unpack_job(job)
        handler = JOBS.get(name)
        if handler is None:
            log.error("%s: unknown job %r dropped", self.worker, name)
            self._settle(queue, job, None)
            return
        try:
            if self._delivery is not None and handler is batch.run:
                # on main, a delivery's ack sweeps for this thread's next job (_take)
                (token,) = args
                sweep = self._in_turn()
                self._handed = self._delivery.run(token, self.worker, job, begun, sweep).taken
                settled = True
            else:
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
