"""The job queue (docs/internals.md): scheduled -> instant -> pending -> deleted, nack and scrub.

Every transition is a function of `app/lua/lib/jobs.lua`, the one job state machine, so
the rules (a job is unique; only its holder may move it out of pending) are written
once. Acquiring moves a job atomically into the worker's own pending list with BLMOVE,
so a job is never held only in a process's memory: if the worker dies, ScrubQueues gives
it back. The worker names itself in the pending index in the same round trip, before it
can hold anything, so no pending list is ever unknown to ScrubQueues.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, cast

import redis

from app.lua import Scripts
from app.models import job_calls
from app.models.job_calls import NOT_KEPT, Kept
from app.models.keys import AUX, MAIN, Keys, Place
from app.redis_client import is_cluster, text

__all__ = [
    "AUX",
    "MAIN",
    "JobQueue",
    "Located",
    "QueueAt",
    "process_of",
    "promote_all",
    "script_groups",
    "take_first",
    "take_keys",
]


def process_of(holder: str) -> str:
    """A holder is a worker thread, `<process>/<thread>`; heartbeats are per process."""
    return holder.split("/", 1)[0]


class Located(Protocol):
    """A job queue by where it lives: what a sweep names, and all the delivery engine
    needs of one (it moves jobs with its own asyncio scripts: app/delivery/room.py)."""

    @property
    def name(self) -> str: ...

    @property
    def place(self) -> Place: ...

    @property
    def cluster(self) -> bool: ...  # on a Redis Cluster: one script names one place


Q = TypeVar("Q", bound=Located)


@dataclass(frozen=True)
class QueueAt:
    """A queue's name and place, without a client: the engine's (JobQueue moves jobs on
    a sync client; the engine's Room does on its asyncio one)."""

    keys: Keys
    name: str
    shard: int | None
    cluster: bool

    @functools.cached_property
    def place(self) -> Place:  # named on every step of a delivery: worked out once
        return self.keys.queue_place(self.name, self.shard)


@dataclass(frozen=True)
class JobQueue:
    client: redis.Redis
    keys: Keys
    scripts: Scripts
    name: str = MAIN
    shard: int | None = 0  # main lives on every shard; aux in the catalog (shard unused)

    @functools.cached_property
    def place(self) -> Place:  # named on every step of a delivery: worked out once
        return self.keys.queue_place(self.name, self.shard)

    @functools.cached_property
    def cluster(self) -> bool:
        return is_cluster(self.client)

    def push(self, job: bytes, now: int, at: int | None = None) -> bool:
        return self.scripts.run(
            job_calls.push(self.place, self.name, job, now if at is None else at, now)
        )

    def acquire(
        self, worker: str, timeout: float, client: redis.Redis | None = None
    ) -> bytes | None:
        """Block up to timeout seconds; the job lands in the worker's pending list.

        One round trip: SADD to the pending index, then BLMOVE. If the reply is lost, the
        job may sit in the pending list unseen: the caller scrubs its own list then."""
        k = self.place
        pipe = (client or self.client).pipeline(transaction=False)
        pipe.sadd(k.jobs_pending_index(self.name), worker)
        # redis-py types BLMOVE's timeout as int; Redis takes seconds with a fraction
        seconds = cast(int, timeout)
        pipe.blmove(
            k.jobs_instant(self.name), k.jobs_pending(self.name, worker), seconds, "RIGHT", "LEFT"
        )
        # BLMOVE's reply (the client decodes none): the job moved, or None when none came
        return cast(bytes | None, pipe.execute()[1])

    def settle(self, worker: str, job: bytes, now: int, at: int | None = None) -> bool:
        """Acknowledge the job (at None) or give it back to run at `at` (a nack); False,
        changing nothing, when the worker no longer holds it."""
        return self.scripts.run(job_calls.settle(self.place, self.name, worker, job, at, now))

    def scrub(self, holder: str, silence_ms: int = 0, *, forget: bool = False) -> int:
        """Give back the holder's jobs if its process has been silent for `silence_ms` by
        Redis's clock (0: unconditionally, the holder itself recovering). Returns how
        many, or -1 when the process is alive."""
        call = job_calls.scrub(
            self.place, self.name, holder, process_of(holder), silence_ms, forget
        )
        return self.scripts.run(call)

    def scrub_many(
        self,
        process: str,
        holders: list[str],
        silence_ms: int = 0,
        *,
        forget: bool = False,
        kept: Kept = NOT_KEPT,
    ) -> int:
        """scrub() for many holders of one process, SCRUB_CHUNK to a script: a process's
        thousands of delivery slots cost a few calls, a live process one. Returns how
        many jobs went back, or -1 when the process is alive. With `kept` (the attempt
        log's bounds), a delivery cut short is recorded as `abandoned`."""
        moved = 0
        calls = job_calls.scrub_many(
            self.place, self.name, process, holders, silence_ms, forget, kept
        )
        for call in calls:
            n = self.scripts.run(call)
            if n < 0:
                return -1
            moved += n
        return moved

    def workers_holding(self) -> set[str]:
        return {text(w) for w in self.client.smembers(self.place.jobs_pending_index(self.name))}

    def states(self, job: bytes) -> list[str]:
        """Every state the job is in, for tests and diagnostics: never more than one."""
        k = self.place
        found = []
        if self.client.zscore(k.jobs_scheduled(self.name), job) is not None:
            found.append("scheduled")
        found += ["instant"] * self.client.lrange(k.jobs_instant(self.name), 0, -1).count(job)
        for worker in self.workers_holding():
            held = self.client.lrange(k.jobs_pending(self.name, worker), 0, -1).count(job)
            found += ["pending"] * held
        return found

    def indexed(self, job: bytes) -> bool:
        member = cast(str, job)  # redis-py types members as str; a job is bytes
        return bool(self.client.sismember(self.place.jobs_index(self.name), member))


def by_process(holders: set[str]) -> dict[str, list[str]]:
    """Holders grouped by their process, each group sorted (scrubbed in a stable order)."""
    found: dict[str, list[str]] = {}
    for holder in sorted(holders):
        found.setdefault(process_of(holder), []).append(holder)
    return found


def script_groups(queues: list[Q]) -> list[list[Q]]:
    """On a single Redis one script may name every place; on a cluster one place each."""
    if not queues:
        return []
    if queues[0].cluster:
        return [[q] for q in queues]
    return [queues]


def take_keys(group: Sequence[Located], worker: str) -> list[str]:
    """What a sweep script (job_take, deliver_take) names per queue."""
    return job_calls.sweep_keys([(q.place, q.name) for q in group], worker)


def take_first(queues: list[JobQueue], worker: str) -> tuple[JobQueue, bytes] | None:
    """A non-blocking sweep: the first job of the first queue in `queues` that has one,
    moved into that queue's pending list of `worker`."""
    for group in script_groups(queues):
        found = group[0].scripts.run(job_calls.take([(q.place, q.name) for q in group], worker))
        if found:
            return group[found.at], found.job
    return None


def promote_all(queues: list[JobQueue], now: int, limit: int = 1000) -> int | None:
    """Due scheduled jobs of every queue become instant; returns the earliest due time
    of a job still scheduled, or None."""
    earliest: int | None = None
    for group in script_groups(queues):
        call = job_calls.promote([(q.place, q.name) for q in group], now, limit)
        next_at = group[0].scripts.run(call).next_at
        if next_at is not None and (earliest is None or next_at < earliest):
            earliest = next_at
    return earliest
