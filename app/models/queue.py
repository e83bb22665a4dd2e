"""The job queue of seed 003: scheduled -> instant -> pending -> deleted, nack and scrub.

Every transition is a function of `app/lua/lib/jobs.lua`, the one job state machine, so
the rules (a job is unique; only its holder may move it out of pending) are written
once. Acquiring moves a job atomically into the worker's own pending list with BLMOVE,
so a job is never held only in a process's memory: if the worker dies, ScrubQueues gives
it back. The worker names itself in the pending index in the same round trip, before it
can hold anything, so no pending list is ever unknown to ScrubQueues.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from app.lua import Scripts
from app.models.keys import Keys

MAIN = "main"
AUX = "aux"


def process_of(holder: str) -> str:
    """A holder is a worker thread, `<process>/<thread>`; heartbeats are per process."""
    return holder.split("/", 1)[0]


@dataclass(frozen=True)
class JobQueue:
    client: redis.Redis
    keys: Keys
    scripts: Scripts
    name: str = MAIN

    def push(self, job: bytes, now: int, at: int | None = None) -> bool:
        return bool(
            self.scripts.job_push(
                keys=self.keys.job_states(self.name), args=[job, now if at is None else at, now]
            )
        )

    def promote(self, now: int, limit: int = 1000) -> tuple[int, int | None]:
        """Due scheduled jobs become instant; returns (moved, next due time or None)."""
        k = self.keys
        moved, next_at = self.scripts.job_promote(
            keys=[k.jobs_scheduled(self.name), k.jobs_instant(self.name)], args=[now, limit]
        )
        return int(moved), None if next_at == -1 else int(next_at)

    def acquire(
        self, worker: str, timeout: float, client: redis.Redis | None = None
    ) -> bytes | None:
        """Block up to timeout seconds; the job lands in the worker's pending list.

        One round trip: SADD to the pending index, then BLMOVE. If the reply is lost, the
        job may sit in the pending list unseen: the caller scrubs its own list then."""
        k = self.keys
        pipe = (client or self.client).pipeline(transaction=False)
        pipe.sadd(k.jobs_pending_index(self.name), worker)
        pipe.blmove(
            k.jobs_instant(self.name), k.jobs_pending(self.name, worker), timeout, "RIGHT", "LEFT"
        )
        return pipe.execute()[1]

    def settle(self, worker: str, job: bytes, now: int, at: int | None = None) -> bool:
        """Acknowledge the job (at None) or give it back to run at `at` (a nack); False,
        changing nothing, when the worker no longer holds it."""
        k = self.keys
        return bool(
            self.scripts.job_settle(
                keys=[*k.job_states(self.name), k.jobs_pending(self.name, worker)],
                args=[job, -1 if at is None else at, now],
            )
        )

    def scrub(self, holder: str, silence_ms: int = 0, *, forget: bool = False) -> int:
        """Give back the holder's jobs if its process has been silent for `silence_ms` by
        Redis's clock (0: unconditionally, the holder itself recovering). Returns how
        many, or -1 when the process is alive."""
        k = self.keys
        return int(
            self.scripts.job_scrub(
                keys=[
                    k.jobs_pending(self.name, holder),
                    k.jobs_instant(self.name),
                    k.jobs_pending_index(self.name),
                    k.workers,
                ],
                args=[holder, process_of(holder), silence_ms, "1" if forget else "0"],
            )
        )

    def workers_holding(self) -> set[str]:
        return {w.decode() for w in self.client.smembers(self.keys.jobs_pending_index(self.name))}

    def states(self, job: bytes) -> list[str]:
        """Every state the job is in, for tests and diagnostics: never more than one."""
        k = self.keys
        found = []
        if self.client.zscore(k.jobs_scheduled(self.name), job) is not None:
            found.append("scheduled")
        found += ["instant"] * self.client.lrange(k.jobs_instant(self.name), 0, -1).count(job)
        for worker in self.workers_holding():
            held = self.client.lrange(k.jobs_pending(self.name, worker), 0, -1).count(job)
            found += ["pending"] * held
        return found

    def indexed(self, job: bytes) -> bool:
        return bool(self.client.sismember(self.keys.jobs_index(self.name), job))
