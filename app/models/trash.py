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
from app.models.keys import Keys

CHUNK = 2_000  # batches per call: a few ms on the CI machine


@dataclass(frozen=True)
class Trash:
    client: redis.Redis
    keys: Keys
    scripts: Scripts

    def purge(self, member: str) -> None:
        """Delete every batch of one trash member (`<token>/<n>/<lane>`)."""
        token, n, lane = member.rsplit("/", 2)
        k = self.keys
        while self.scripts.subscriber_purge(
            keys=[k.trash, k.trash_lane(token, n, lane), k.batch_index(lane)],
            args=[k.prefix, member, token, CHUNK],
        ):
            pass

    def purge_all(self) -> int:
        """Finish every deletion left unfinished; returns how many trash lists it took."""
        members = [m.decode() for m in self.client.smembers(self.keys.trash)]
        for member in members:
            self.purge(member)
        return len(members)
