"""What a job needs, passed explicitly: one per worker thread."""

from __future__ import annotations

from dataclasses import dataclass

import redis

from app.lua import Scripts
from app.models.keys import Keys
from app.models.queue import AUX, MAIN, JobQueue
from config.settings import Settings


@dataclass(frozen=True)
class JobContext:
    settings: Settings
    redis: redis.Redis
    keys: Keys
    scripts: Scripts

    def queue(self, name: str = MAIN, shard: int | None = 0) -> JobQueue:
        return JobQueue(self.redis, self.keys, self.scripts, name, shard)

    def queues(self, name: str | None = None) -> list[JobQueue]:
        """`main` of every shard, then `aux` (only those of `name` when given)."""
        mains = [self.queue(MAIN, n) for n in range(self.keys.shards)]
        return [q for q in [*mains, self.queue(AUX, None)] if name in (None, q.name)]
