"""What an ingest does for its lake besides writing it: registers it in Redis
(`P{c}:lakes`, so erasures wait for it), carries out the erasures whose Redis side is
done (spark/lake_erase.py), deletes the rows past their payload retention
(spark/lake_retention.py), compacts the small files of its micro-batches
(spark/lake_compact.py), and vacuums the files all of these dropped.

Erasures run in the ingest process itself, since the lake may be on a machine the
workers never see. They run at the start, between micro-batches and at the end, never
beside a commit: every commit and every erasure hold one lock. And never while a
micro-batch that began before the erasure's `redis_done_at` is still in flight: that
batch may have read an entry before Redis was erased, so the erasure waits for its
commit (a batch begun later reads the streams as erased: spark/erased.py).

Vacuum: the files a delete dropped stay in storage until vacuumed, so that a reader
that listed them before the delete (a replay, a query) can finish. With `erase_now` they
go at once (retention 0); else once `vacuum_hours` old, at the first vacuum after that:
the ingest vacuums at its start and every VACUUM_EVERY_S while it runs.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from app.clock import now_ms
from app.models.keys import Keys
from spark import lake_compact, lake_erase, lake_retention
from spark.delta import location

log = logging.getLogger(__name__)

REGISTER_EVERY_S = 30.0  # `seen_at` at least once a minute, as the workers expect
ERASURES_EVERY_S = 2.0  # how often a running ingest looks for erasures due
VACUUM_EVERY_S = 600.0
# a batch begun this soon after `redis_done_at` still counts as begun before it: the
# workers' clocks and this machine's may differ by that much
CLOCK_SLACK_MS = 5_000


@dataclass
class Keeper:
    client: redis.Redis
    keys: Keys
    output: str
    erase_now: bool = False
    vacuum_hours: int = 1
    say: Callable[[str], None] | None = None
    retention_s: int = 0  # BUSBAR_PAYLOAD_RETENTION_S: topics without their own
    lock: threading.Lock = field(default_factory=threading.Lock)
    inflight: dict[str, int] = field(default_factory=dict)  # table -> ms its batch began
    erased: int = 0  # erasures this run carried out
    _next: dict[str, float] = field(default_factory=dict)

    @property
    def lake(self) -> str:
        return lake_erase.lake_id(self.output)

    def begin(self, table: str) -> None:
        """A micro-batch of `table` is about to read the streams."""
        with self.lock:
            self.inflight[table] = now_ms()

    def end(self, table: str) -> None:
        self.inflight.pop(table, None)

    def register(self) -> None:
        value = json.dumps({"path": location(self.output), "seen_at": now_ms()})
        self.client.hset(self.keys.catalog.lakes, self.lake, value)

    def _due(self, what: str, every_s: float, force: bool) -> bool:
        now = time.monotonic()
        if not force and now < self._next.get(what, 0.0):
            return False
        self._next[what] = now + every_s
        return True

    def tick(self, force: bool = False) -> None:
        """Whatever is due: the registration, the erasures, a vacuum. Never raises on
        Redis being away for a moment: the next tick tries again."""
        try:
            if self._due("register", REGISTER_EVERY_S, force):
                self.register()
            if self._due("erasures", ERASURES_EVERY_S, force):
                self.erase_due()
            if self._due("retention", VACUUM_EVERY_S, force):
                self.retire()
            if self._due("compact", VACUUM_EVERY_S, force):
                self.compact()
            if not self.erase_now and self._due("vacuum", VACUUM_EVERY_S, force):
                with self.lock:
                    lake_erase.vacuum(self.output, self.vacuum_hours)
        except redis.RedisError as exc:
            log.warning("lake upkeep: Redis did not answer (%s); trying again", exc)

    def retire(self) -> dict[str, int]:
        """Payload retention (spark/lake_retention.py): the rows past it deleted; their
        files go with the next vacuum (at once with `erase_now`)."""
        own = lake_retention.own_retentions(self.client, self.keys)
        cut = lake_retention.cuts(own, self.retention_s, now_ms())
        if not cut.events and not cut.attempts:
            return {"events": 0, "attempts": 0}
        with self.lock:
            deleted = lake_retention.apply(self.output, cut)
            if self.erase_now and any(deleted.values()):
                lake_erase.vacuum(self.output, 0)
        if self.say and any(deleted.values()):
            self.say(f"retention: {deleted['events']} events, {deleted['attempts']} attempts "
                     "past their retention deleted from the lake")  # fmt: skip
        return deleted

    def compact(self) -> dict[str, int]:
        """The small files merged (spark/lake_compact.py); the ones replaced go with the
        next vacuum, as an erasure's: a reader that listed them can finish."""
        with self.lock:
            done = lake_compact.compact(self.output)
        if self.say and done["files_removed"]:
            self.say(f"compacted: {done['files_removed']} small files into {done['files_added']}")
        return done

    def erase_due(self) -> int:
        """Carry out every erasure due that no batch in flight holds up; how many."""
        done = 0
        for erasure in lake_erase.due(self.client, self.keys, self.lake):
            assert erasure.redis_done_at is not None
            cutoff = erasure.redis_done_at + CLOCK_SLACK_MS
            with self.lock:
                if any(began <= cutoff for began in self.inflight.values()):
                    continue  # after that batch's commit, at the next tick
                outcome = lake_erase.erase(self.output, erasure)
                if self.erase_now:
                    lake_erase.vacuum(self.output, 0)
                lake_erase.record(self.client, self.keys, self.lake, erasure, outcome, now_ms())
            done += 1
            if self.say:
                self.say(f"erasure {erasure.id}: {outcome['events']} events, "
                         f"{outcome['attempts']} attempts deleted from the lake "
                         f"({outcome['files_rewritten']} files rewritten)")  # fmt: skip
        self.erased += done
        return done
