"""The job queue of seed 003: scheduled -> instant -> pending -> deleted, nack and scrub.

Jobs are unique (pushing one that exists in any state is a no-op), and acquiring moves a
job atomically into the worker's own pending list with BLMOVE, so a job is never held
only in a process's memory: if the worker dies, ScrubQueues gives the job back.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from app.lua import Scripts
from app.models.keys import Keys

MAIN = "main"
AUX = "aux"


@dataclass(frozen=True)
class JobQueue:
    client: redis.Redis
    keys: Keys
    scripts: Scripts
    name: str = MAIN

    def push(self, job: bytes, now: int, at: int | None = None) -> bool:
        k = self.keys
        return bool(
            self.scripts.job_push(
                keys=[
                    *k.job_states(self.name),
                ],
                args=[job, now if at is None else at, now],
            )
        )

    def promote(self, now: int, limit: int = 1000) -> tuple[int, int | None]:
        """Due scheduled jobs become instant; returns (moved, next due time or None)."""
        k = self.keys
        moved, next_at = self.scripts.job_promote(
            keys=[k.jobs_scheduled(self.name), k.jobs_instant(self.name)], args=[now, limit]
        )
        return int(moved), None if next_at == -1 else int(next_at)

    def register(self, worker: str) -> None:
        """Before a worker first blocks on the queue, so ScrubQueues knows where to look."""
        self.client.sadd(self.keys.jobs_pending_index(self.name), worker)

    def acquire(
        self, worker: str, timeout: float, client: redis.Redis | None = None
    ) -> bytes | None:
        """Block up to timeout seconds; the job lands in the worker's pending list."""
        k = self.keys
        return (client or self.client).blmove(
            k.jobs_instant(self.name), k.jobs_pending(self.name, worker), timeout, "RIGHT", "LEFT"
        )

    def ack(self, worker: str, job: bytes) -> bool:
        k = self.keys
        return bool(
            self.scripts.job_ack(
                keys=[k.jobs_index(self.name), k.jobs_pending(self.name, worker)], args=[job]
            )
        )

    def nack(self, worker: str, job: bytes, at: int) -> bool:
        k = self.keys
        return bool(
            self.scripts.job_nack(
                keys=[k.jobs_pending(self.name, worker), k.jobs_scheduled(self.name)],
                args=[job, at],
            )
        )

    def scrub(self, worker: str) -> int:
        k = self.keys
        return int(
            self.scripts.job_scrub(
                keys=[
                    k.jobs_pending(self.name, worker),
                    k.jobs_instant(self.name),
                    k.jobs_pending_index(self.name),
                ],
                args=[worker],
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
