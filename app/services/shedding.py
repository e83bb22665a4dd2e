"""Expire and Autodrop: the two ways queued events leave Redis without being delivered.

Expire removes what is past its ttl. Autodrop keeps Redis answering when memory runs
low: under BUSBAR_REDIS_MIN_FREE free bytes it frees until twice that is free, first the
oldest entries of the delivery log and the attempt stream (history: only the lake can
miss them, and its reader reports what it lost), then expired events, then the queues
over their fair share (app/services/fair_share.py: the largest first, down to a common
level, oldest lowest-priority batches first), and only if that cannot free enough, the
oldest batches of the lowest lane whoever holds them. Every queued event dropped is
counted, globally and on its subscriber."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import redis
from redis.cluster import RedisCluster

from app.lua import Scripts
from app.models import partitions
from app.models.keys import LANES, Keys, Place
from app.models.shed_calls import Dropped, batch_drop, expire
from app.redis_client import text
from app.services.counters import merged
from app.services.fair_share import FairShare
from config.settings import Settings

log = logging.getLogger(__name__)
DROP_CHUNK = 50  # batches per Lua call: frees memory in steps and keeps each call short
LOG_CHUNK = 100  # delivery log (and attempt stream) entries trimmed per shard per step
EXPIRE_CHUNK = 10_000  # queued events Expire reads per Lua call: about 6 ms
FAIR_ROUNDS = 4  # weigh-and-shed rounds: an estimate that freed too little is redone
SETTLE_S = 2.0  # longest wait for the server's background frees before memory is read
SETTLE_LOOK_S = 0.005  # how often it looks meanwhile (a 200,000-member set: ~80 ms)


@dataclass(frozen=True)
class Domain:
    """One Redis server's memory and the shards it holds (all of them on a single Redis;
    on a cluster, those whose slot a master serves): Autodrop frees a server's memory
    from its own shards."""

    node: Any  # a redis.cluster.ClusterNode, or None on a single Redis
    shards: list[Place]


def domains(client: redis.Redis, keys: Keys) -> list[Domain]:
    if not isinstance(client, RedisCluster):
        return [Domain(None, keys.all_shards())]
    found: dict[str, Domain] = {}
    for place in keys.all_shards():
        node = client.get_node_from_key(place.counters)
        found.setdefault(node.name, Domain(node, [])).shards.append(place)
    return list(found.values())


def used_bytes(client: redis.Redis, domain: Domain, settle_s: float = SETTLE_S) -> int:
    """The server's used memory once it has freed what it was told to free. A key of
    many parts is freed on a background thread (UNLINK; Valkey's DEL too, lazyfree being
    on by default; a batch of over 64 list nodes, ~512 KB, is one): read at once after
    a shed of such batches, the memory still counts them, and Autodrop would take the
    shed for too little, shed again and reach its last resort, which drops whoever's
    batch is oldest. So Autodrop's reading waits, up to `settle_s`, for the server's
    pending frees; /metrics reads at once (settle_s 0)."""
    deadline = time.monotonic() + settle_s
    while True:
        if domain.node is None:
            memory = client.info("memory")
        else:
            memory = client.info("memory", target_nodes=domain.node)
        if not int(memory.get("lazyfree_pending_objects", 0)) or time.monotonic() > deadline:
            return int(memory["used_memory"])
        time.sleep(SETTLE_LOOK_S)


@dataclass(frozen=True)
class Shedding:
    client: redis.Redis
    keys: Keys
    scripts: Scripts
    settings: Settings
    expire_chunk: int = EXPIRE_CHUNK

    def expire(self, now: int, entire: bool | None = None) -> int:
        """Remove expired events of every subscriber that has events queued; returns
        how many. The shards' event gauges say which, in a read a shard: walking every
        subscriber in a script of its own each BUSBAR_EXPIRE_INTERVAL cost a worker
        about 30 ms of CPU a second, and Redis as much, for 10,000 subscribers with
        nothing queued."""
        k = self.keys
        entire = self.settings.cleanup_entire_queue if entire is None else entire
        total = 0
        queued = {t for t, n in merged(self.client, k, "event_gauge").items() if int(n) > 0}
        tokens = [text(raw) for raw in self.client.hkeys(k.subscribers) if raw in queued]
        # (token, partition, lane, position): every partition's first step, pipelined;
        # then the steps of those a step left mid-queue, until none is
        every = zip(tokens, partitions.pids_many(self.client, k, tokens), strict=True)
        todo: list[tuple[str, str, int, int]] = [
            (token, pid, 0, 0)  # the token itself is the one partition at concurrency 1
            for token, pids in every
            for pid in pids
        ]
        while todo:
            steps = self.scripts.run_many([
                expire(k, token, pid, now, entire, self.expire_chunk, lane, pos)
                for token, pid, lane, pos in todo
            ])  # fmt: skip
            total += sum(step.removed for step in steps)
            todo = [
                (token, pid, step.lane, step.position)
                for (token, pid, _, _), step in zip(todo, steps, strict=True)
                if step.lane is not None
            ]
        return total

    def free_bytes(self, domain: Domain) -> int:
        return self.settings.redis_max_mem - used_bytes(self.client, domain)

    def autodrop(self, now: int) -> int:
        """Returns the number of events dropped (expired ones included), over every Redis
        server short of memory (each is judged against BUSBAR_REDIS_MAX_MEM on its own)."""
        floor = self.settings.redis_min_free
        short = [d for d in domains(self.client, self.keys) if self.free_bytes(d) < floor]
        if not short:
            return 0
        dropped = self.expire(now, entire=True)
        for domain in short:
            dropped += self._drop(domain)
        return dropped

    def _drop(self, domain: Domain) -> int:
        target = 2 * self.settings.redis_min_free
        trimmed = self.trim_log(domain, target)
        dropped = 0
        fair = FairShare(self.client, self.keys, self.scripts)
        for _ in range(FAIR_ROUNDS):
            need = target - self.free_bytes(domain)
            shed = fair.shed(domain.shards, need) if need > 0 else 0
            dropped += shed
            if not shed:
                break
        while self.free_bytes(domain) < target:  # the last resort: what no share could free
            batches, events = self.drop_lowest(domain)
            dropped += events
            if not batches:
                break
        log.warning(
            "autodrop%s: %d log entries trimmed (delivery log, attempt stream), %d events "
            "dropped, %d bytes free",
            f" on {domain.node.name}" if domain.node is not None else "",
            trimmed,
            dropped,
            self.free_bytes(domain),
        )
        return dropped

    def drop_lowest(self, domain: Domain) -> Dropped:
        """One chunk of the oldest batches of the lowest lane that has any: (batches,
        events) dropped. Each chunk looks from the lowest lane again: publishing goes on
        meanwhile, and a pass that went down the lanes once, lane after lane, could reach
        lane 0 (and drop a subscriber's that keeps up) while lane 10 had filled again."""
        for lane in reversed(LANES):
            for shard in domain.shards:
                dropped = self.scripts.run(batch_drop(shard, lane, DROP_CHUNK))
                if dropped.batches:
                    return dropped
        return Dropped(0, 0)

    @staticmethod
    def logs(shard: Place) -> tuple[str, str]:
        return (shard.delivery_log, shard.attempt_stream)

    def trim_log(self, domain: Domain, target: int) -> int:
        """Trim the oldest entries of the delivery log and the attempt stream until
        `target` bytes are free or both are empty; returns how many. Without this, logs
        that fill memory left Autodrop nothing to drop but queued events, high lanes
        included, and Redis still full."""
        trimmed = 0
        while self.free_bytes(domain) < target:
            step = 0
            for stream in (s for shard in domain.shards for s in self.logs(shard)):
                length = int(self.client.xlen(stream))
                if length:
                    keep = max(0, length - LOG_CHUNK)
                    step += int(self.client.xtrim(stream, maxlen=keep, approximate=False))
            if not step:
                break
            trimmed += step
        return trimmed
