"""Redis connections for the Spark side: the driver (planning, progress) and each reader
task (one stream each). On a Redis Cluster each shard's stream lives on the node that
serves its slot; the cluster client sends every read there."""

from __future__ import annotations

import redis
from redis.cluster import RedisCluster


def open_client(url: str, cluster: bool, timeout: float = 60.0) -> redis.Redis:
    """A fresh connection: never kept on a reader (locks cannot be pickled)."""
    if cluster:
        return RedisCluster.from_url(  # type: ignore[return-value]
            url, socket_timeout=timeout, socket_connect_timeout=10
        )
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=10)
