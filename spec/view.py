"""Reading busbar's state the way its own readers do, for assertions: counters add up
over the catalog and every shard; a subscriber's gauges are on its shard."""

from __future__ import annotations

import json

import redis

from app.models.keys import Keys
from app.services.counters import totals


def counter(client: redis.Redis, keys: Keys, name: str) -> int:
    return int(totals(client, keys).get(name.encode(), 0))


def noted(client: redis.Redis, stream: str) -> list[dict]:
    """An operations stream's entries as the events' data: `kind` and the rest."""
    return [
        {"kind": f[b"kind"].decode(), **json.loads(f[b"data"])} for _, f in client.xrange(stream)
    ]
