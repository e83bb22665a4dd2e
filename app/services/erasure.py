"""Carrying out an erasure (app/models/erasures.py): passes over every shard, each a
series of bounded steps, one script each (app/lua/erase_*.lua).

A pass goes, on each shard: the subscribers' queued batches (their coalescing maps with
them), their dead letters, the delivery log, their attempt logs, the attempt stream, in
that order, so that a batch found in the queues or the log holding the entity has its
attempts erased in the same pass. A batch in flight is never touched; while one held the
entity, another pass follows once it has settled (acknowledged, it is in the log; failed,
back in its queue or a dead letter). Where each step goes on is on the shard's receipt,
written by the step itself: a job cut short (its slice of time ran out, or its worker was
killed) goes on where it was, and nothing is counted twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import redis

from app.lua import Scripts
from app.lua.call import Call
from app.models import erasure_calls as calls
from app.models import lakes, partitions
from app.models.erasure_calls import Match, Step
from app.models.erasures import finish, job_of, match_of
from app.models.keys import Keys, Place
from app.models.queue import JobQueue
from app.redis_client import text

QUEUED_BUDGET = 2_000  # queued events a step reads (as Expire's, about 2 ms)
LIST_BUDGET = 500  # dead letters, or stream entries, a step reads
PER_PASS = ("q:", "dl:", "pass.")  # receipt fields a new pass starts afresh
# done; more (the slice ran out); waiting (a batch in flight holds the entity); lakes
# (Redis is erased, a lake has still to erase it)
Progress = Literal["done", "more", "waiting", "lakes"]


class SliceOver(Exception):
    """The job's slice of time ran out: it comes back and goes on where it was."""


@dataclass(frozen=True)
class Subscriber:
    token: str
    name: str
    pids: list[str]


@dataclass
class Eraser:
    client: redis.Redis
    keys: Keys
    scripts: Scripts
    clock: Callable[[], float] = time.monotonic

    def run(self, erasure_id: str, slice_s: float, now_ms: int) -> Progress:
        """Work on the erasure for about `slice_s` (Progress says what is left): Redis
        first, in passes; then it waits for the lakes, and is done once they have erased
        it too (the value is forgotten then)."""
        record = self.keys.catalog.erasure(erasure_id)
        raw = self.client.hmget(record, "match", "state", "redis_done_at")
        if raw[0] is None or raw[1] == b"done":
            return "done"
        if raw[2] is None:
            progress = self._redis(erasure_id, match_of(raw[0]), slice_s, now_ms)
            if progress is not None:
                return progress
        fields = {text(k): text(v) for k, v in self.client.hgetall(record).items()}
        if lakes.pending(fields, lakes.lakes(self.client, self.keys), now_ms):
            return "lakes"
        self.scripts.run(finish(self.keys, erasure_id, raw[0], now_ms))
        return "done"

    def _redis(self, erasure_id: str, match: Match, slice_s: float, now_ms: int) -> Progress | None:
        """A slice of the passes over Redis; None once every Redis store is erased (then
        `redis_done_at` tells the lakes they may erase)."""
        record = self.keys.catalog.erasure(erasure_id)
        self.client.hset(record, "updated_at", now_ms)
        try:
            self._pass(erasure_id, match, self.clock() + slice_s)
        except SliceOver:
            return "more"
        if self._held(erasure_id):
            self._next_pass(erasure_id)
            return "waiting"
        self.client.hset(record, "redis_done_at", now_ms)
        return None

    def _drain(self, call: Call[Step], deadline: float) -> None:
        """The same step again until it says done: it reads where to go on from the
        receipt itself. The slice is checked between steps."""
        while True:
            if self.clock() > deadline:
                raise SliceOver
            if self.scripts.run(call).done:
                return

    def _pass(self, erasure_id: str, match: Match, deadline: float) -> None:
        """Every step of a pass in order; those the receipts say are done are skipped
        without a call (a slice that comes back goes on at once where it was)."""
        k, subs, shards = self.keys, self._subscribers(), self.keys.all_shards()
        with self.client.pipeline(transaction=False) as pipe:
            for shard in shards:
                pipe.hgetall(shard.erasure(erasure_id))
            receipts = {s.shard: {text(f): v for f, v in r.items()}
                        for s, r in zip(shards, pipe.execute(), strict=True)}  # fmt: skip

        def done(token: str, field: str) -> bool:
            return receipts[k.shard_of(token)].get(field) == b"done"

        def shard_done(shard: Place, field: str) -> bool:
            return receipts[shard.shard].get(field) == b"done"

        steps: list[Call[Step]] = [
            *(calls.queued(k, erasure_id, s.token, pid, match, QUEUED_BUDGET)
              for s in subs for pid in s.pids if not done(s.token, f"q:{pid}")),
            *(calls.deadletters(k, erasure_id, s.token, match, LIST_BUDGET)
              for s in subs if not done(s.token, f"dl:{s.token}")),
            *(calls.deliveries(shard, erasure_id, match, LIST_BUDGET)
              for shard in shards if not shard_done(shard, "pass.deliveries")),
            *(calls.attempt_log(k, erasure_id, s.token, s.name, match, LIST_BUDGET)
              for s in subs if not done(s.token, f"pass.log:{s.token}")),
            *(calls.shard_attempts(shard, erasure_id, match, LIST_BUDGET)
              for shard in shards if not shard_done(shard, "pass.attempts")),
        ]  # fmt: skip
        for step in steps:
            self._drain(step, deadline)

    def _subscribers(self) -> list[Subscriber]:
        tokens = sorted(text(t) for t in self.client.hkeys(self.keys.subscribers))
        with self.client.pipeline(transaction=False) as pipe:
            for token in tokens:
                pipe.hget(self.keys.subscriber(token), "name")
            names = pipe.execute()
        pids = partitions.pids_many(self.client, self.keys, tokens)
        return [
            Subscriber(token, text(name) if name else "(deleted client)", parts)
            for token, name, parts in zip(tokens, names, pids, strict=True)
        ]

    def _held(self, erasure_id: str) -> int:
        with self.client.pipeline(transaction=False) as pipe:
            for shard in self.keys.all_shards():
                pipe.hget(shard.erasure(erasure_id), "pass.held")
            return sum(int(v or 0) for v in pipe.execute())

    def _next_pass(self, erasure_id: str) -> None:
        """Clear each shard's per-pass places (queues and dead letters are read again from
        their start; the streams go on from where they were) and count the pass."""
        for shard in self.keys.all_shards():
            receipt = shard.erasure(erasure_id)
            stale = [f for f in map(text, self.client.hkeys(receipt)) if f.startswith(PER_PASS)]
            if stale:
                self.client.hdel(receipt, *stale)
        self.client.hincrby(self.keys.catalog.erasure(erasure_id), "passes", 1)


def requeue_running(client: redis.Redis, keys: Keys, queue: JobQueue, now: int) -> int:
    """Push the job of every erasure still running whose job is gone (a worker of a
    release before erasures took it and dropped it as unknown, during a rolling upgrade):
    Expire calls it; pushing a job that exists changes nothing. Returns how many."""
    running = sorted(text(i) for i in client.smembers(keys.catalog.erasures_running))
    return sum(queue.push(job_of(i), now) for i in running)
