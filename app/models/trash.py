"""The trash of deleted subscribers: their lane lists, renamed aside in the step that
deletes them, emptied here in bounded steps so no script runs long however much was
queued (100,000 batches take about 50 short calls instead of one half-second script).

The DELETE request empties its own trash before answering; Expire empties whatever a
crash in between left, so a half-finished deletion is always finished by someone.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from app.lua import Scripts
from app.models import subscriber_calls as calls
from app.models.keys import Keys, Place
from app.redis_client import text

CHUNK = 2_000  # batches per call: a few ms on the CI machine


@dataclass(frozen=True)
class Trash:
    client: redis.Redis
    keys: Keys
    scripts: Scripts

    def purge(self, shard: Place, member: str) -> None:
        """Delete every batch of one trash member (`<token>/<n>/<lane>`) of a shard."""
        while self.scripts.run(calls.purge(self.keys, shard, member, CHUNK)):
            pass

    def purge_all(self) -> int:
        """Finish every deletion left unfinished; returns how many trash lists it took."""
        done = 0
        for shard in self.keys.all_shards():
            for member in self.client.smembers(shard.trash):
                self.purge(shard, text(member))
                done += 1
        return done
