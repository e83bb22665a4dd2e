"""A subscriber's partitions: how `concurrency` n > 1 delivers n batches at once while
every ordering key keeps its order (docs/internals.md, Ordering keys).

The layout itself (keys, pids, the drain after a change) is app/lua/lib/partitions.lua's;
this module names the same things for the Python side: which partitions a subscriber
has now (every place that lists, expires or replays walks them), where an ordering key
falls (the same stable hash the queueing step computes), and each partition's job.
"""

from __future__ import annotations

import hashlib

import redis

from app import codec
from app.models.keys import Keys

MAX_CONCURRENCY = 256  # deliveries in flight per subscriber
# Partitions per place in flight: keys hash to partitions at random, so with as many
# partitions as places the busiest partition bounds a backlog's drain (400 keys over 64
# partitions: the busiest held 11 keys, 1.8x the mean); with four times as many, keys
# that hash together rarely wait for each other (docs/internals.md).
PER_PLACE = 4


def count(concurrency: int) -> int:
    """The partitions of a subscription of that concurrency (1: the subscriber itself)."""
    return 1 if concurrency <= 1 else PER_PLACE * concurrency


def pid(token: str, n: int, p: int) -> str:
    """Partition p of a layout of n: the token itself when n is 1."""
    return token if n <= 1 else f"{token}#{n}.{p}"


def partition_of(key: str, n: int) -> int:
    """Where an ordering key falls: the first 32 bits of its SHA-1 modulo n, as
    lib/partitions.lua's partition_of, so a key lands in one partition whichever side
    computes it, on every process and after every restart."""
    if n <= 1:
        return 0
    return int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) % n


def aside(n: int) -> int:
    """The last partition of a layout of n, its aside partition's number (n > 1: where a
    failing key's events step aside, lib/partitions.lua), else 0."""
    return n if n > 1 else 0


def jobs(token: str, concurrency: int) -> list[bytes]:
    """The delivery job of each partition of a subscription of that concurrency, its aside
    partition's last (none at 1: the subscriber's own job, `["batch", [token]]`, is its
    one partition's)."""
    n = count(concurrency)
    if n <= 1:
        return []
    return [codec.pack_job("batch", [pid(token, n, p)]) for p in range(aside(n) + 1)]


def pids(client: redis.Redis, keys: Keys, token: str) -> list[str]:
    """Every partition that may hold batches: the layout's (its aside partition
    included), and while a change of concurrency drains, the old layout's that still
    hold some."""
    return pids_many(client, keys, [token])[0]


def pids_many(client: redis.Redis, keys: Keys, tokens: list[str]) -> list[list[str]]:
    """pids() of each token, in one pipelined round trip for them all."""
    with client.pipeline(transaction=False) as pipe:
        for token in tokens:
            pipe.hget(keys.subscriber(token), "partitions")
            pipe.smembers(keys.draining(token))
        replies = pipe.execute()
    found = []
    for i, token in enumerate(tokens):
        n = int(replies[2 * i] or 1)
        draining = sorted(m.decode() for m in replies[2 * i + 1])
        found.append([pid(token, n, p) for p in range(aside(n) + 1)] + draining)
    return found
