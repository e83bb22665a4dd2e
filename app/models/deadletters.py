"""Dead letters: events of batches that failed max_attempts times, kept for inspection
and replay instead of being lost."""

from __future__ import annotations

from typing import Any

import redis

from app import codec
from app.errors import NotFound
from app.lua import Scripts
from app.models.keys import Keys
from app.models.queue import MAIN
from app.redis_client import raw as as_bytes

REPLAY_CHUNK = 2_000  # dead letters requeued per Lua call: a few ms on the CI machine


class DeadLetters:
    def __init__(
        self, client: redis.Redis, keys: Keys, scripts: Scripts, chunk: int = REPLAY_CHUNK
    ) -> None:
        self._redis = client
        self._keys = keys
        self._scripts = scripts
        self._chunk = chunk

    def _require_subscriber(self, token: str) -> None:
        if not self._redis.exists(self._keys.subscriber(token)):
            raise NotFound("no subscription for this client")

    def list(self, token: str) -> list[dict[str, Any]]:
        self._require_subscriber(token)
        raw = self._redis.lrange(self._keys.deadletters(token), 0, -1)
        return [codec.unpack_dead_letter(as_bytes(r)).describe() for r in raw]

    def replay(self, token: str, now: int) -> int:
        """Requeue every dead letter, oldest first, a chunk per script call."""
        k = self._keys
        home = k.home(token)
        total, left = 0, 1
        while left:
            count, left = self._scripts.deadletters_replay(
                keys=[
                    k.subscriber(token),
                    k.deadletters(token),
                    home.event_gauge,
                    home.batch_gauge,
                    home.counters,
                    *home.job_states(MAIN),
                ],
                args=[home.base, token, now, self._chunk],
            )
            if count < 0:
                raise NotFound("no subscription for this client")
            total += int(count)
        return total

    def clear(self, token: str) -> int:
        self._require_subscriber(token)
        return int(self._redis.delete(self._keys.deadletters(token)))
