"""Payload retention carried out (app/models/retention.py), by Expire.

- Dead letters: each goes once its topic's retention has run out since it failed.
- The delivery log and the attempt stream (each shard's), and the subscribers' attempt
  logs: they mix every topic's events (an attempt names no topic), so they keep nothing
  older than the shortest retention in force; what erasures put in the streams'
  `:erased` companions goes with the entries it stands for.
- Queued events are on their way, not kept: their route's ttl bounds them.
- The lake: its ingest applies the retention to its rows (spark/, docs/lake.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from app.lua import Scripts
from app.models.keys import Keys, Place
from app.models.retention import Retention, retire_deadletters
from app.redis_client import text


@dataclass(frozen=True)
class Applied:
    deadletters: int = 0
    stream_entries: int = 0


@dataclass(frozen=True)
class Retiring:
    client: redis.Redis
    keys: Keys
    scripts: Scripts
    retention: Retention

    def apply(self, now: int) -> Applied:
        own = self.retention.by_topic()
        horizon = self.retention.horizon_s(own)
        if not horizon:
            return Applied()
        tokens = sorted(text(t) for t in self.client.hkeys(self.keys.subscribers))
        entries = self._streams(now - horizon * 1000, tokens)
        return Applied(self._deadletters(now, own, tokens), entries)

    def _streams(self, oldest: int, tokens: list[str]) -> int:
        """Every stream trimmed to what is younger than `oldest` (ms), exactly."""
        trimmed = 0
        streams = [s for shard in self.keys.all_shards() for s in self._logs(shard)]
        for stream, companion in streams:
            trimmed += int(self.client.xtrim(stream, minid=oldest, approximate=False))
            if companion:
                stale = [i for i in map(text, self.client.hkeys(companion))
                         if i != "n" and int(i.split("-")[0]) < oldest]  # fmt: skip
                if stale:
                    self.client.hdel(companion, *stale)
        with self.client.pipeline(transaction=False) as pipe:
            for token in tokens:
                pipe.xtrim(self.keys.attempts(token), minid=oldest, approximate=False)
            trimmed += sum(int(n) for n in pipe.execute())
        return trimmed

    @staticmethod
    def _logs(shard: Place) -> list[tuple[str, str]]:
        return [(shard.delivery_log, shard.delivery_log_erased),
                (shard.attempt_stream, shard.attempt_stream_erased)]  # fmt: skip

    def _deadletters(self, now: int, own: dict[str, int], tokens: list[str]) -> int:
        with self.client.pipeline(transaction=False) as pipe:
            for token in tokens:
                pipe.llen(self.keys.deadletters(token))
            holding = [t for t, n in zip(tokens, pipe.execute(), strict=True) if n]
        by_topic = {topic: s * 1000 for topic, s in own.items()}
        default_ms = self.retention.default_s * 1000
        removed = 0
        for token in holding:
            at: int | None = 0
            while at is not None:
                step = self.scripts.run(
                    retire_deadletters(self.keys, token, now, default_ms, by_topic, at)
                )
                removed, at = removed + step.removed, step.next
        return removed
