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

import http.client
import json
import logging
import os
import random
import time
from collections.abc import Sequence

import redis

from app import codec
from app.errors import CallbackRefused, JobLost
from app.lua import Scripts
from app.models import event_ids
from app.models.keys import Keys
from app.models.queue import MAIN, JobQueue, script_groups, take_keys
from app.models.secrets import SALT_BYTES
from app.services import signing
from app.services.callback_http import CallbackClient
from app.services.deadline import Deadlines, LeaseExpired
from app.services.failure import reason
from app.services.flight import Flight, Outcome, begun
from config.settings import Settings

__all__ = ["Delivery", "Flight", "Outcome", "Taken"]
log = logging.getLogger(__name__)
MAX_DEAD_LETTERS = 10_000
NONCE_BYTES = 8
# a job a sweep took: its queue, the job, and its delivery when the take began one
Taken = tuple[JobQueue, bytes, Flight | Outcome | None]
MAX_RUN = 16  # batches of one subscriber delivered back to back before its job requeues
# last_status of a delivery the callback policy stopped (app/models/callback_policy.py)
REFUSED_STATUS = "refused_link_local"


def now_ms() -> int:
    return int(time.time() * 1000)


class Draws:
    """A delivery's fencing nonce (64 bits) and a fresh signing salt (new_salt's size),
    cut from random bytes drawn from the OS a page at a time: each os.urandom is a
    system call, and a delivery thread makes one draw per delivery (about 5% of a busy
    worker's CPU when drawn one by one). One per Delivery, i.e. per thread."""

    PAGE = 4096

    def __init__(self) -> None:
        self._page, self._at = b"", 0

    def nonce_and_salt(self) -> tuple[str, str]:
        size = NONCE_BYTES + SALT_BYTES
        if self._at + size > len(self._page):
            self._page, self._at = os.urandom(self.PAGE - self.PAGE % size), 0
        raw = self._page[self._at : self._at + size].hex()
        self._at += size
        return raw[: 2 * NONCE_BYTES], raw[2 * NONCE_BYTES :]


def _sweep_of(group: list[JobQueue], worker: str) -> tuple[list[str], list[str]]:
    """What a sweep names (lib/delivery.lua's sweep_and_begin): the keys of each queue
    (queue.take_keys), and each queue's shard key base."""
    return take_keys(group, worker), [q.place.base for q in group]


def _taken(group: list[JobQueue], worker: str, nonce: str, found: list) -> Taken:
    """A sweep's find ({place, job, begin reply}) as (queue, job, flight or outcome);
    None third for a job that is not a delivery."""
    place, job, reply = found
    queue = group[int(place) - 1]
    if reply[0] == b"run":
        return queue, job, None
    if reply[0] == b"lost":
        raise JobLost("deliver_take: the job is no longer held by this worker")
    token = codec.unpack_job(job)[1][0]
    return queue, job, begun(token, worker, job, nonce, reply)


class Delivery:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        scripts: Scripts,
        settings: Settings,
        http: CallbackClient,
        deadlines: Deadlines | None = None,
        max_run: int = MAX_RUN,
    ) -> None:
        self._max_run = max_run
        self._keys = keys
        self._scripts = scripts
        self._settings = settings
        self._http = http
        self._deadlines = deadlines or Deadlines()
        self._draws = Draws()

    def _call(
        self, script: str, token: str, worker: str, job: bytes, *extra: object,
        sweep: tuple[list[str], list[str]] = ([], []),
    ) -> list:  # fmt: skip
        """`sweep`: keys and args a script that sweeps for the next job appends."""
        k = self._keys
        home = k.home(token)
        reply = getattr(self._scripts, script)(
            keys=[
                k.subscriber(token),
                home.event_gauge,
                home.batch_gauge,
                home.counters,
                *home.job_states(MAIN),
                home.jobs_pending(MAIN, worker),
                k.deadletters(token),
                home.delivery_log,
                *sweep[0],
            ],
            args=[home.base, token, now_ms(), job, *extra, *sweep[1]],
        )
        if reply[0] == b"lost":
            raise JobLost(f"{script}: the delivery job is no longer held by this worker")
        return reply

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
        flight = first if first is not None else self.begin(token, worker, job)
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
        reply = self._call("deliver_begin", token, worker, job, nonce, salt)
        return begun(token, worker, job, nonce, reply)

    def take(
        self, queues: Sequence[JobQueue], worker: str
    ) -> tuple[JobQueue, bytes, Flight | Outcome | None] | None:
        """A sweep of `queues` (in that order) that takes the first job and begins its
        delivery in the same step: (queue, job, the begun flight or what the job did);
        None in the third place for a job that is not a delivery. None when all empty."""
        nonce, salt = self._draws.nonce_and_salt()
        for group in script_groups(queues):
            keys, bases = _sweep_of(group, worker)
            found = self._scripts.deliver_take(
                keys=keys, args=[worker, now_ms(), nonce, salt, *bases]
            )
            if found:
                return _taken(group, worker, nonce, found)
        return None

    def body(self, flight: Flight) -> bytes:
        """Routemaster's JSON array; with `id` on each event when the subscription asked."""
        events = []
        for entry in flight.entries:
            event = codec.unpack_entry(entry)
            shape = event.delivery()
            if flight.event_ids:
                shape["id"] = event_ids.of_entry(entry, event)
            events.append(shape)
        return json.dumps(events, separators=(",", ":")).encode()

    def send(self, flight: Flight) -> str:
        """POST the batch: the callback's status code as text, or the reason it gave none.
        Not sent at all (JobLost) when the flight began longer ago than half the scrub
        window: the process was paused, and another worker may own the batch by now."""
        body = self.body(flight)
        settings = self._settings
        headers = signing.headers(
            settings.signing_key, flight.salts, flight.token, flight.batch_id.decode(),
            flight.created_at, int(time.time()), body,
        )  # fmt: skip
        send_by = flight.began + settings.scrub_after_ms / 2000
        with self._deadlines.limit(settings.timeout, send_by) as limit:
            try:
                status = self._http.post(
                    flight.callback,
                    body,
                    {"Content-Type": "application/json", **headers},
                    flight.uuid,
                )
                return str(status)
            except LeaseExpired as exc:
                raise JobLost(f"delivery to {flight.client} not sent: {exc.message}") from None
            except CallbackRefused as exc:
                log.warning("callback of %s refused: %s", flight.client, exc.message)
                return REFUSED_STATUS
            except (OSError, http.client.HTTPException, ValueError) as exc:
                return "timeout" if limit.expired else reason(exc)

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
        ok = status.isdigit() and 200 <= int(status) < 300
        took_ms = int((time.monotonic() - flight.began) * 1000)
        settings, count = self._settings, len(flight.entries)
        head = (flight.token, flight.worker, flight.job, flight.batch_id, flight.nonce)
        group = self._sweep_group(flight.token, sweep) if ok else []
        try:
            if ok:
                maxlen = settings.delivery_log_maxlen if settings.delivery_log else 0
                nonce, salt = self._draws.nonce_and_salt() if go_on or group else ("", "")
                extra = _sweep_of(group, flight.worker)
                reply = self._call(
                    "deliver_ack", *head, settings.hp_heal_rate, took_ms, maxlen, nonce,
                    salt, "1" if go_on else "", flight.worker, sweep=extra,
                )  # fmt: skip
            else:
                backoff = settings.max_backoff_ms * random.uniform(1.0, 1.5)
                reply = self._call(
                    "deliver_fail", *head, settings.hp_damage_rate, backoff, status,
                    MAX_DEAD_LETTERS,
                )  # fmt: skip
        except JobLost:
            raise JobLost(
                f"answer {status} of {flight.client} at {flight.host} not recorded: the job "
                "was taken over while this worker was paused or cut off from Redis"
            ) from None
        if not ok:
            log.info(
                "delivery to %s at %s failed: %s (%d events, %d ms)",
                flight.client, flight.host, status, count, took_ms,
            )  # fmt: skip
        after: Flight | Outcome | None = None
        taken = None
        if reply[0] == b"next":
            after = begun(flight.token, flight.worker, flight.job, nonce, reply[1])
            reply = [b"done"]
        elif reply[0] == b"done" and len(reply) > 2:
            taken = _taken(group, flight.worker, nonce, reply[2:])
        kind = reply[0].decode()
        if kind == "stale":
            log.warning(
                "answer from %s for batch %s of %s came after its delivery was superseded",
                flight.host, flight.batch_id.decode(), flight.client,
            )  # fmt: skip
        if kind == "done":
            kind = "delivered" if ok else "failed"
        return Outcome(kind, count, status, taken), after

    def _sweep_group(self, token: str, sweep: Sequence[JobQueue]) -> list[JobQueue]:
        """The queues of `sweep` an ack of `token`'s delivery may take from: one script
        names one node's keys (every shard on one Redis; on a cluster, one slot)."""
        home = self._keys.home(token).base
        for group in script_groups(list(sweep)):
            if any(q.place.base == home for q in group):
                return group
        return []
