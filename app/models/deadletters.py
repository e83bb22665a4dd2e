"""Dead letters: events of batches that failed max_attempts times, kept for inspection
and replay instead of being lost."""

from __future__ import annotations

from typing import Any

import redis

from app import codec
from app.errors import NotFound
from app.lua import Scripts
from app.models.keys import Keys
from app.models.subscriber_calls import deadletters_replay
from app.redis_client import raw as as_bytes
from app.turn import Turn, no_turn

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

    def list(self, token: str, turn: Turn = no_turn) -> list[dict[str, Any]]:
        """Every dead letter, oldest first, a `turn` after each: a subscriber may hold
        10,000, each unpacked with its event."""
        self._require_subscriber(token)
        raw = self._redis.lrange(self._keys.deadletters(token), 0, -1)
        letters = []
        for r in raw:
            letters.append(codec.unpack_dead_letter(as_bytes(r)).describe())
            turn()
        return letters

    def replay(self, token: str, now: int) -> int:
        """Requeue every dead letter, oldest first, a chunk per script call."""
        total, left = 0, 1
        while left:
            step = self._scripts.run(deadletters_replay(self._keys, token, now, self._chunk))
            if step is None:
                raise NotFound("no subscription for this client")
            total, left = total + step.events, step.left
        return total

    def clear(self, token: str) -> int:
        self._require_subscriber(token)
        return int(self._redis.delete(self._keys.deadletters(token)))
