"""The bus's counters are kept where they happen: the catalog counts what publishes, each
shard what its own scripts do (queueing, deliveries, drops). Readers want the bus as a
whole: this adds them up, in one pipelined round trip (one per node on a cluster).
"""

from __future__ import annotations

import redis

from app.models.keys import Keys

Number = int | float


def number(raw: bytes | str | int | None) -> Number:
    """A Redis value as the exact number it is (HINCRBY: int; HINCRBYFLOAT: float)."""
    if raw is None:
        return 0
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    try:
        return int(text)
    except ValueError:
        return float(text)


def totals(client: redis.Redis, keys: Keys) -> dict[bytes, bytes]:
    """Every counter summed over the catalog and the shards, as Redis would hold it."""
    pipe = client.pipeline(transaction=False)
    for place in [keys.catalog, *keys.all_shards()]:
        pipe.hgetall(place.counters)
    summed: dict[bytes, Number] = {}
    for hashed in pipe.execute():
        for name, value in hashed.items():
            summed[name] = summed.get(name, 0) + number(value)
    return {name: str(value).encode() for name, value in summed.items()}


def merged(client: redis.Redis, keys: Keys, gauge: str) -> dict[bytes, bytes]:
    """A per-subscriber gauge (`event_gauge` or `batch_gauge`) of every shard in one map:
    each subscriber is on one shard only."""
    pipe = client.pipeline(transaction=False)
    for place in keys.all_shards():
        pipe.hgetall(getattr(place, gauge))
    found: dict[bytes, bytes] = {}
    for hashed in pipe.execute():
        found.update(hashed)
    return found
