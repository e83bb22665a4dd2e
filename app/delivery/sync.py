"""Delivering one subscriber's next batch: the `batch` job.

Three scripts over the job state machine: deliver_begin picks the batch and marks it in
flight under a fresh nonce; after the HTTP answer, deliver_ack or deliver_fail settles
the batch and the job in one step. Between the two, the only state is in Redis (the job
in this worker's pending list, the batch marked in flight), so a crash at any point
delivers the batch again later, never zero times. An answer is accepted only from the
delivery in flight (batch id + nonce), by the worker that still holds the job: a worker
that was paused past the scrub window finds its job gone (`lost`) and changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from app.clock import Clock, now_ms
from app.delivery import calls
from app.delivery.blocking import BlockingClient
from app.delivery.flight import Flight, Outcome, Taken, begun
from app.delivery.plan import (
    MAX_DEAD_LETTERS,
    MAX_RUN,
    REFUSED_STATUS,
    Draws,
    Plan,
    body_of,
)
from app.delivery.replies import checked, lost_answer, taken
from app.delivery.steps import send
from app.errors import JobLost
from app.lua import Scripts
from app.models.keys import Keys
from app.models.queue import JobQueue, script_groups
from config.settings import Settings

__all__ = ["MAX_DEAD_LETTERS", "REFUSED_STATUS", "Delivery", "Draws", "Flight", "Outcome", "Taken"]
log = logging.getLogger(__name__)


class Delivery(Plan):
    """A delivery's steps on the synchronous clients: what tests and tools drive; the
    worker's engine runs the same steps on asyncio (app/delivery/steps.py)."""

    def __init__(
        self,
        keys: Keys,
        scripts: Scripts,
        settings: Settings,
        http: BlockingClient,
        max_run: int = MAX_RUN,
        clock: Clock = now_ms,
    ) -> None:
        super().__init__(keys, settings, max_run, clock)
        self._scripts = scripts
        self._http = http

    def _run(self, call: calls.Call) -> list[Any]:
        reply = getattr(self._scripts, call.script)(keys=call.keys, args=call.args)
        return checked(call.script, reply)

    def run(
        self,
        token: str,
        worker: str,
        job: bytes,
        first: Flight | Outcome | None = None,
        sweep: Sequence[JobQueue] = (),
    ) -> Outcome:
        """One run of the subscriber's job: begin (unless the take began it already),
        send, then ack or fail. While the subscriber has more due at once, the ack begins
        the next batch in the same step, up to `max_run` in a row; then the job goes back
        in line behind the others. With `sweep` (the queues a worker thread sweeps, in
        its order), the acknowledgement that ends the run also takes the thread's next
        job from them and begins it: Outcome.taken (one round trip a delivery, not two,
        while jobs are waiting, as in a fan-out)."""
        flight: Flight | Outcome | None = (
            first if first is not None else self.begin(token, worker, job)
        )
        runs = 0
        while isinstance(flight, Flight):
            runs += 1
            outcome, flight = self.finish_and_next(
                flight, self.send(flight), runs < self._max_run, sweep
            )
        return flight if isinstance(flight, Outcome) else outcome

    def begin(self, token: str, worker: str, job: bytes) -> Flight | Outcome:
        """The next due batch, marked in flight under a fresh nonce; or what the job did
        instead (wait, idle, gone). JobLost when this worker no longer holds the job."""
        nonce, salt = self._draws.nonce_and_salt()
        issued = time.monotonic()
        reply = self._run(calls.begin(self._keys, token, worker, job, self._clock(), nonce, salt))
        return begun(token, worker, job, nonce, reply, issued)

    def take(self, queues: Sequence[JobQueue], worker: str) -> Taken | None:
        """A sweep of `queues` (in that order) that takes the first job and begins its
        delivery in the same step (Taken.flight: the begun flight or what the job did,
        None for a job that is not a delivery). None when all are empty."""
        nonce, salt = self._draws.nonce_and_salt()
        for group in script_groups(list(queues)):
            call = calls.take(calls.Sweep.of(group, worker), worker, self._clock(), nonce, salt)
            issued = time.monotonic()
            found = self._scripts.deliver_take(keys=call.keys, args=call.args)
            if found:
                return taken(group, worker, nonce, found, issued)
        return None

    def body(self, flight: Flight) -> bytes:
        return body_of(flight)

    def send(self, flight: Flight) -> str:
        """POST the batch (steps.send, on the blocking client's loop): the status code as
        text, or the reason there was none; JobLost when the lease ran out."""
        return self._http.run(send(self._http.client, self._settings, flight, clock=self._clock))

    def finish(self, flight: Flight, status: str) -> Outcome:
        """Acknowledge (2xx) or fail the batch, and settle the job, in one script."""
        return self.finish_and_next(flight, status, go_on=False)[0]

    def finish_and_next(
        self, flight: Flight, status: str, go_on: bool, sweep: Sequence[JobQueue] = ()
    ) -> tuple[Outcome, Flight | Outcome | None]:
        """finish(); with `go_on`, an acknowledgement also begins the subscriber's next
        batch when one is due at once: (outcome, that flight or what the job did). With
        `sweep`, an acknowledgement that ends the job's run sweeps those of the queues
        one script may name with the subscriber's own (all on one Redis, its shard on a
        cluster) for the worker's next job: Outcome.taken."""
        f = self.finishing(flight, status, go_on, sweep)
        issued = time.monotonic()
        try:
            reply = self._run(f.call)
        except JobLost:
            raise lost_answer(flight, status) from None
        return self.finished(f, flight, status, reply, issued)
