"""Autodrop's fair shares: when Redis runs short of memory, the subscribers holding the
most are shed first, down to a common level, and a subscriber under that level loses
nothing (before, the oldest batches of the lowest lane went first whoever held them, so
one client's flood at a subscriber that was down dropped another client's few events).

The level is max-min fair ("water-filling"): with `need` bytes to free, the level L is
the one at which the queues above it, each cut down to L, free `need`; a subscriber
holding less than L is within its share. Shares are weighed in bytes, estimated per
subscriber from its queued events and the bytes an event takes in the batches sampled
(the oldest and newest of each lane: MEMORY USAGE over their length), so a flood of a
few large events counts for what it holds. A subscriber over its share loses its
oldest lowest-priority batches (app/lua/subscriber_shed.lua), counted as autodropped
and named in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import redis

from app.lua import Scripts
from app.models import partitions
from app.models.keys import BATCH_HEADER, LANES, Keys, Place
from app.models.shed_calls import subscriber_shed
from app.redis_client import text

log = logging.getLogger(__name__)
SHED_CHUNK = 50  # batches per Lua call, as Autodrop's lane pass


@dataclass(frozen=True)
class Queue:
    """One subscriber's queue on a shard: events, and the bytes one takes (estimated)."""

    shard: Place
    token: str
    events: int
    event_bytes: float

    @property
    def bytes(self) -> float:
        return self.events * self.event_bytes


def level(weights: Sequence[float], need: float) -> float:
    """The water level: the largest L with sum(max(0, w - L)) >= need (0 when even
    everything is not enough). Cutting every weight above L down to L frees `need`."""
    ordered = sorted(weights, reverse=True)
    above = 0.0
    for k, weight in enumerate(ordered, start=1):
        above += weight
        candidate = (above - need) / k
        following = ordered[k] if k < len(ordered) else 0.0
        if candidate >= following:
            return max(0.0, candidate)
    return 0.0


def weigh(client: redis.Redis, keys: Keys, shards: list[Place]) -> list[Queue]:
    """Every subscriber with events queued on these shards, bytes estimated from samples."""
    pipe = client.pipeline(transaction=False)
    for shard in shards:
        pipe.hgetall(shard.event_gauge)
    queued = [
        (shard, token.decode(), int(n))
        for shard, gauge in zip(shards, pipe.execute(), strict=True)
        for token, n in gauge.items()
        if int(n) > 0
    ]
    # each lane's first and last batch, in every partition (the token at concurrency 1)
    parts = partitions.pids_many(client, keys, [token for _, token, _ in queued])
    pipe = client.pipeline(transaction=False)
    for pids in parts:
        for pid in pids:
            for lane in LANES:
                pipe.lindex(keys.lane(pid, lane), 0)
                pipe.lindex(keys.lane(pid, lane), -1)
    ends = iter(pipe.execute())
    per = 2 * len(LANES)
    samples = []
    for (_, token, _), pids in zip(queued, parts, strict=True):
        ids = [next(ends) for _ in range(per * len(pids))]
        samples.append({keys.batch(token, i.decode()) for i in ids if i is not None})
    pipe = client.pipeline(transaction=False)
    for batch_keys in samples:
        for key in batch_keys:
            pipe.memory_usage(key, samples=0)
            pipe.llen(key)
    sizes = iter(pipe.execute())
    found = []
    for (shard, token, events), batch_keys in zip(queued, samples, strict=True):
        used = held = 0
        for _ in batch_keys:
            used += int(next(sizes) or 0)
            held += max(0, int(next(sizes)) - len(BATCH_HEADER))
        found.append(Queue(shard, token, events, used / held if held else 0.0))
    return found


@dataclass(frozen=True)
class FairShare:
    client: redis.Redis
    keys: Keys
    scripts: Scripts

    def shed(self, shards: list[Place], need: int) -> int:
        """Shed the queues over their share so about `need` bytes come free; returns the
        events dropped. Each over-share subscriber is named in a warning."""
        queues = weigh(self.client, self.keys, shards)
        water = level([q.bytes for q in queues], need)
        dropped = 0
        for queue in queues:
            if queue.bytes <= water or queue.event_bytes <= 0:
                continue
            keep = int(water // queue.event_bytes)
            events = self._cut(queue, keep)
            if events:
                log.warning(
                    "autodrop: %d events of %s shed: over its share (%d events, about %d "
                    "bytes queued; the share is about %d bytes)",
                    events, self._name(queue.token), queue.events, queue.bytes, water,
                )  # fmt: skip
            dropped += events
        return dropped

    def _cut(self, queue: Queue, keep: int) -> int:
        shard, token = queue.shard, queue.token
        dropped = 0
        while True:
            shed = self.scripts.run(subscriber_shed(self.keys, shard, token, keep, SHED_CHUNK))
            dropped += shed.events
            if not shed.batches or shed.left <= keep:
                return dropped

    def _name(self, token: str) -> str:
        """Logs name clients by name, never by token (a credential)."""
        name = self.client.hget(self.keys.subscriber(token), "name")
        return text(name) if name else "(a client without a name)"
