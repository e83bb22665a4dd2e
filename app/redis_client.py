"""The one place that builds Redis clients, so every process talks to Redis the same way.

hiredis is picked up by redis-py automatically when installed (the dependency is
`redis[hiredis]`); health checks keep pooled connections usable across Redis restarts.
"""

from __future__ import annotations

import redis

from config.settings import Settings


def connect(settings: Settings, *, timeout: float | None = 5.0) -> redis.Redis:
    """A pooled client for the configured Redis; `timeout=None` for blocking commands."""
    return redis.Redis.from_url(
        settings.effective_redis_url,
        socket_timeout=timeout,
        socket_connect_timeout=5.0,
        health_check_interval=30,
        retry_on_timeout=False,
        decode_responses=False,
    )


def hiredis_available() -> bool:
    """Reported by /health: without hiredis parsing replies costs several times more CPU."""
    try:
        import hiredis  # noqa: F401
    except ImportError:
        return False
    return True
