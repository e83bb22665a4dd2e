"""Worker heartbeats, from a thread of their own, stamped with Redis's clock.

A delivery can block for BUSBAR_TIMEOUT seconds; if heartbeats came from the delivery
threads, a slow subscriber would make a live worker look dead and get its jobs scrubbed
and delivered twice. A dedicated thread keeps the `workers` hash honest, and keeps
beating until the last delivery thread has settled its job (the process stops it last).
The time written is Redis's `TIME`, the clock ScrubQueues judges silence by, so skew
between hosts cannot make a live worker look dead.
"""

from __future__ import annotations

import logging
import threading

import redis

from app.lua import Scripts
from app.models import job_calls
from app.models.keys import Keys, Place

log = logging.getLogger(__name__)


class Heartbeat:
    def __init__(
        self, client: redis.Redis, keys: Keys, scripts: Scripts, worker_id: str, every_s: float
    ) -> None:
        self._redis = client
        self._keys = keys
        self._scripts = scripts
        self.worker_id = worker_id
        self._every = every_s

    def places(self) -> list[Place]:
        """Every tag with pending lists: the catalog (aux) and each shard (main). Each
        keeps its own copy of the heartbeat beside them, so a scrub is one script."""
        return [self._keys.catalog, *self._keys.all_shards()]

    def beat(self) -> int:
        """Returns the time written, ms by Redis's clock (the catalog's)."""
        stamps = [
            self._scripts.run(job_calls.heartbeat(place, self.worker_id)) for place in self.places()
        ]
        return stamps[0]

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
            for place in self.places():
                self._redis.hdel(place.workers, self.worker_id)
        except redis.RedisError as exc:
            log.warning("could not remove worker %s: %s", self.worker_id, exc)
