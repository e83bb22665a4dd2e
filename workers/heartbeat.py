"""Worker heartbeats, from a thread of their own.

A delivery can block for BUSBAR_TIMEOUT seconds; if heartbeats came from the delivery
threads, a slow subscriber would make a live worker look dead and get its jobs scrubbed
and delivered twice. A dedicated thread keeps the `workers` hash honest.
"""

from __future__ import annotations

import logging
import threading
import time

import redis

from app.models.keys import Keys

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


class Heartbeat:
    def __init__(self, client: redis.Redis, keys: Keys, worker_id: str, every_s: float) -> None:
        self._redis = client
        self._keys = keys
        self.worker_id = worker_id
        self._every = every_s

    def beat(self) -> None:
        self._redis.hset(self._keys.workers, self.worker_id, now_ms())

    def run(self, stop: threading.Event) -> None:
        """Beat until told to stop; a Redis outage is logged and retried, not fatal."""
        while not stop.is_set():
            try:
                self.beat()
            except redis.RedisError as exc:
                log.warning("heartbeat failed: %s", exc)
            stop.wait(self._every)

    def forget(self) -> None:
        """On a clean exit nothing of ours is pending, so there is nothing to scrub."""
        try:
            self._redis.hdel(self._keys.workers, self.worker_id)
        except redis.RedisError as exc:
            log.warning("could not remove worker %s: %s", self.worker_id, exc)
