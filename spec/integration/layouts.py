"""The two layouts the integration tests run on: one Redis, and a 3-master Redis Cluster
started from the same embedded binary (dev/cluster.py). A test sees the layout through
the usual `redis_url` and `redis_client` fixtures; `bus()` asks `env_for(url)` what a
busbar process needs to use it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis
from redis.cluster import RedisCluster

from app.models.keys import Keys

CLUSTER_SHARDS = 6  # two per master: every node holds subscribers
DEFAULT_SHARDS = 4


@dataclass(frozen=True)
class Layout:
    name: str  # "single" | "cluster"
    url: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def keys(self) -> Keys:
        return Keys("busbar:", int(self.env.get("BUSBAR_SHARDS", DEFAULT_SHARDS)))

    def client(self) -> redis.Redis:
        if self.name == "cluster":
            return RedisCluster.from_url(self.url)  # type: ignore[return-value]
        return redis.Redis.from_url(self.url)

    def flush(self, client: redis.Redis) -> None:
        if isinstance(client, RedisCluster):
            client.flushall(target_nodes=RedisCluster.PRIMARIES)
        else:
            client.flushdb()


_ENVS: dict[str, dict[str, str]] = {}


def register(layout: Layout) -> None:
    _ENVS[layout.url] = layout.env


def env_for(url: str) -> dict[str, str]:
    """What a busbar process needs to use the Redis at `url` (nothing for one server)."""
    return dict(_ENVS.get(url, {}))


def cluster_layout(url: str) -> Layout:
    return Layout(
        "cluster",
        url,
        {"BUSBAR_REDIS_CLUSTER": "1", "BUSBAR_SHARDS": str(CLUSTER_SHARDS)},
    )


def flushed(request: Any, which: str) -> Layout:
    """The layout `which` ("single" or "cluster": the session's Redis, or its cluster),
    registered and flushed, for a module fixture that runs a whole matrix on it once (the
    `redis_url` fixture flushes per test)."""
    if which == "cluster":
        layout = cluster_layout(request.getfixturevalue("local_cluster").url)
    else:
        layout = Layout("single", request.getfixturevalue("single_redis_url"))
    register(layout)
    client = layout.client()
    try:
        layout.flush(client)
    finally:
        client.close()
    return layout
