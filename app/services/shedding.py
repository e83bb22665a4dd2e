"""Expire and Autodrop: the two ways queued events leave Redis without being delivered.

Expire removes what is past its ttl. Autodrop keeps Redis answering when memory runs
low: under BUSBAR_REDIS_MIN_FREE free bytes it frees until twice that is free, first
expired events, then the oldest batches of the lowest lane (DESIGN section 7; the
delivery log comes first once it exists). Every event either way is counted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis

from app.lua import Scripts
from app.models.keys import LANES, Keys
from config.settings import Settings

log = logging.getLogger(__name__)
DROP_CHUNK = 50  # batches per Lua call: frees memory in steps and keeps each call short


@dataclass(frozen=True)
class Shedding:
    client: redis.Redis
    keys: Keys
    scripts: Scripts
    settings: Settings

    def expire(self, now: int, entire: bool | None = None) -> int:
        """Remove expired events of every subscriber; returns how many."""
        k = self.keys
        entire = self.settings.cleanup_entire_queue if entire is None else entire
        total = 0
        for raw in self.client.smembers(k.subscribers):
            token = raw.decode()
            total += int(
                self.scripts.expire(
                    keys=[k.subscriber(token), k.event_gauge, k.batch_gauge, k.counters],
                    args=[k.prefix, token, now, "1" if entire else "0"],
                )
            )
        return total

    def free_bytes(self) -> int:
        used = int(self.client.info("memory")["used_memory"])
        return self.settings.redis_max_mem - used

    def autodrop(self, now: int) -> int:
        """Returns the number of events dropped (expired ones included)."""
        floor, target = self.settings.redis_min_free, 2 * self.settings.redis_min_free
        if self.free_bytes() >= floor:
            return 0
        dropped = self.expire(now, entire=True)
        k = self.keys
        for lane in reversed(LANES):
            while self.free_bytes() < target:
                batches, events = self.scripts.batch_drop(
                    keys=[k.event_gauge, k.batch_gauge, k.counters, k.batch_index(lane)],
                    args=[k.prefix, lane, DROP_CHUNK],
                )
                dropped += int(events)
                if not batches:
                    break
        log.warning("autodrop: %d events dropped, %d bytes free", dropped, self.free_bytes())
        return dropped
