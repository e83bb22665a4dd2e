"""What a bus is fixed to once it has been used: its number of shards, and the layout
of its keys (app/models/layout.py), both checked by check_store before a process starts.

Subscribers are placed on shards by crc32(token) mod BUSBAR_SHARDS, so a process that
counted shards differently would look for every subscriber in the wrong place. The first
process to start records the number; any later one with another value refuses to start
(exit 2, naming the variable). Data left by busbar before shards existed (keys without a
hash tag) is refused the same way: docs/cluster.md, Upgrading, says what to do with it.
"""

from __future__ import annotations

import redis

from app.lua import Scripts
from app.models.keys import Keys
from app.models.layout import check_layout
from config.errors import ConfigError

OLD_LAYOUT = ("tokens", "subscribers", "topics")  # keys of the layout before shards


def check_shards(client: redis.Redis, keys: Keys) -> None:
    client.hsetnx(keys.meta, "shards", keys.shards)
    recorded = int(client.hget(keys.meta, "shards") or keys.shards)
    if recorded != keys.shards:
        raise ConfigError(
            f"BUSBAR_SHARDS is {keys.shards} but this bus (BUSBAR_KEY_PREFIX "
            f"{keys.prefix!r}) was set up with {recorded}: set BUSBAR_SHARDS={recorded}"
        )
    old = [f"{keys.prefix}{name}" for name in OLD_LAYOUT]
    if sum(client.exists(key) for key in old):
        raise ConfigError(
            f"Redis holds busbar data in the layout before shards ({', '.join(old)}): "
            "drain it with the old version, or see docs/cluster.md, Upgrading"
        )


def check_store(client: redis.Redis, keys: Keys) -> int:
    """The layout first (a new store is told from an older one by what is in it, the
    shard count included), then the shards; the layout the process runs on."""
    layout = check_layout(client, keys, Scripts(client))
    check_shards(client, keys)
    return layout
