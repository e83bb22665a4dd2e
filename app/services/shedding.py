"""Expire and Autodrop: the two ways queued events leave Redis without being delivered.

Expire removes what is past its ttl. Autodrop keeps Redis answering when memory runs
low: under BUSBAR_REDIS_MIN_FREE free bytes it frees until twice that is free, first the
delivery log's oldest entries (already delivered: only the lake can miss them, and its
reader reports what it lost), then expired events, then the oldest batches of the lowest
lane (DESIGN section 7). Every queued event dropped either way is counted.
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
LOG_CHUNK = 100  # delivery log entries trimmed per partition per step
EXPIRE_CHUNK = 10_000  # queued events Expire reads per Lua call: about 6 ms


@dataclass(frozen=True)
class Shedding:
    client: redis.Redis
    keys: Keys
    scripts: Scripts
    settings: Settings
    expire_chunk: int = EXPIRE_CHUNK

    def expire(self, now: int, entire: bool | None = None) -> int:
        """Remove expired events of every subscriber; returns how many."""
        k = self.keys
        entire = self.settings.cleanup_entire_queue if entire is None else entire
        total = 0
        for raw in self.client.smembers(k.subscribers):
            token = raw.decode()
            mode, lane, pos = "1" if entire else "0", 0, 0
            while lane >= 0:
                removed, lane, pos = self.scripts.expire(
                    keys=[k.subscriber(token), k.event_gauge, k.batch_gauge, k.counters],
                    args=[k.prefix, token, now, mode, self.expire_chunk, lane, pos],
                )
                total += int(removed)
        return total

    def free_bytes(self) -> int:
        used = int(self.client.info("memory")["used_memory"])
        return self.settings.redis_max_mem - used

    def autodrop(self, now: int) -> int:
        """Returns the number of events dropped (expired ones included)."""
        floor, target = self.settings.redis_min_free, 2 * self.settings.redis_min_free
        if self.free_bytes() >= floor:
            return 0
        trimmed = self.trim_log(target)
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
        log.warning(
            "autodrop: %d delivery log entries trimmed, %d events dropped, %d bytes free",
            trimmed,
            dropped,
            self.free_bytes(),
        )
        return dropped

    def trim_log(self, target: int) -> int:
        """Trim the oldest delivery log entries until `target` bytes are free or the log is
        empty; returns how many. Without this, a log that fills memory left Autodrop
        nothing to drop but queued events, high lanes included, and Redis still full."""
        streams = [self.keys.delivery_log(p) for p in range(self.settings.delivery_log_partitions)]
        trimmed = 0
        while self.free_bytes() < target:
            step = 0
            for stream in streams:
                length = int(self.client.xlen(stream))
                if length:
                    keep = max(0, length - LOG_CHUNK)
                    step += int(self.client.xtrim(stream, maxlen=keep, approximate=False))
            if not step:
                break
            trimmed += step
        return trimmed
