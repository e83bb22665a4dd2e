"""Redis connections for the Spark side: the driver (planning, progress) and each reader
task (one stream each). On a Redis Cluster each shard's stream lives on the node that
serves its slot; the cluster client sends every read there."""

from __future__ import annotations

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry


def open_client(url: str, cluster: bool, timeout: float = 60.0) -> redis.Redis:
    """A fresh connection: never kept on a reader (locks cannot be pickled). redis-py's
    automatic retry is off, as in app/redis_client.py (which `spark` may not import:
    docs/internals.md): a reply lost to a connection error is the caller's to handle,
    never a command sent again blindly."""
    common = {"socket_timeout": timeout, "socket_connect_timeout": 10}
    if cluster:
        return RedisCluster.from_url(  # type: ignore[return-value]
            url, retry=Retry(NoBackoff(), 0), **common
        )
    return redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), retry_on_error=[], **common)
