"""The one place that builds Redis clients, so every process talks to Redis the same way.

hiredis is picked up by redis-py automatically when installed (the dependency is
`redis[hiredis]`); health checks keep pooled connections usable across Redis restarts.

Retries are off, explicitly: redis-py (6.0 and later) resends a command whose reply was
lost to a connection error, three times by default. For busbar's writes that is wrong:
a publish, a delivery step or a BLMOVE that ran but whose reply never came back would
run again, queueing events twice or moving a job the caller does not know it holds.
Without retries the error reaches the caller, who knows what is safe: the web answers
503 (the publisher retries, and may duplicate, as docs/semantics.md says), a worker thread
gives back what its own pending list holds. A pooled connection that Redis closed (a
restart) is still replaced before use: the pool checks it before sending anything.
"""

from __future__ import annotations

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from config.settings import Settings


def no_retry() -> Retry:
    return Retry(NoBackoff(), 0)


def connect(
    settings: Settings, *, timeout: float | None = 5.0, name: str | None = None
) -> redis.Redis:
    """A pooled client for the configured Redis; `timeout=None` for blocking commands;
    `name` set on each of its connections (CLIENT SETNAME: app/unblock.py).

    With BUSBAR_REDIS_CLUSTER, redis-py's cluster client: it follows MOVED and ASK (the
    command was not run there, so following is safe) and finds the new topology after a
    failover; its own retry of a command that met a connection error is off, as above."""
    common = {
        "socket_timeout": timeout,
        "socket_connect_timeout": 5.0,
        "health_check_interval": 30,
        "decode_responses": False,
        "client_name": name,
    }
    if settings.redis_cluster:
        return RedisCluster.from_url(  # type: ignore[return-value]  # answers Redis's commands
            settings.effective_redis_url, retry=no_retry(), **common
        )
    return redis.Redis.from_url(
        settings.effective_redis_url, retry=no_retry(), retry_on_error=[], **common
    )


def connect_async(
    settings: Settings, *, connections: int, timeout: float | None = 5.0, name: str | None = None
) -> redis.asyncio.Redis:
    """connect() for the delivery engine's event loop: redis-py's asyncio client, with
    at most `connections` connections (per node on a cluster); the engine's own gate
    keeps its calls within that, so a waiting call waits for a connection, never makes
    one more. Retries are off, as for connect(). `timeout=None` on one Redis: the
    engine's script calls bound themselves (app/lua: AsyncLuaScript)."""
    retry = redis.asyncio.retry.Retry(NoBackoff(), 0)
    common = {
        "socket_timeout": timeout,
        "socket_connect_timeout": 5.0,
        "health_check_interval": 30,
        "decode_responses": False,
        "retry": retry,
        "client_name": name,
    }
    url = settings.effective_redis_url
    if settings.redis_cluster:
        return redis.asyncio.cluster.RedisCluster.from_url(  # type: ignore[return-value]  # answers Redis's commands
            url, max_connections=connections, **common
        )
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url, max_connections=connections, timeout=None, **common
    )
    return redis.asyncio.Redis(connection_pool=pool, retry=retry)


def hiredis_available() -> bool:
    """Reported by /health: without hiredis parsing replies costs several times more CPU."""
    try:
        import hiredis  # noqa: F401
    except ImportError:
        return False
    return True


def server_time_ms(client: redis.Redis, key: str) -> int:
    """Redis's own clock (TIME), on the node that holds `key`: the clock heartbeats and
    samples are stamped with, whatever the hosts' clocks say."""
    if isinstance(client, RedisCluster):
        node = client.get_node_from_key(key)
        seconds, micros = client.execute_command("TIME", target_nodes=node)
    else:
        seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


_CLUSTER_TYPES: dict[type, bool] = {}


def is_cluster(client: object) -> bool:
    """Whether scripts must keep to one hash slot (several shards per call otherwise).
    Answered once per client class: isinstance against redis-py's classes goes through
    typing's Protocol checks, which cost a delivery sweep several microseconds."""
    kind = type(client)
    found = _CLUSTER_TYPES.get(kind)
    if found is None:
        found = isinstance(client, RedisCluster | redis.asyncio.cluster.RedisCluster)
        _CLUSTER_TYPES[kind] = found
    return found


def text(reply: bytes | str) -> str:
    """A Redis reply as text. busbar's clients never decode replies (decode_responses is
    off: payloads are msgpack), so a reply is bytes; redis-py's types allow str too."""
    return reply.decode() if isinstance(reply, bytes) else reply


def raw(reply: bytes | str) -> bytes:
    """A Redis reply as bytes (see text())."""
    return reply if isinstance(reply, bytes) else reply.encode()
