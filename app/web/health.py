"""Liveness and readiness: /health needs nothing, /pulse proves Redis answers."""

from __future__ import annotations

import time

import redis
from flask import Blueprint, Response, jsonify

from app.clock import now_ms
from app.models.keys import MAIN, Keys
from app.redis_client import hiredis_available
from app.release import LAYOUT, version
from app.web.auth import allow
from app.web.context import web_context
from app.web.errors import error_response

blueprint = Blueprint("health", __name__)

# Routemaster's autoscaling hint: a slow /pulse/scaling tells a latency-based autoscaler
# to add workers. More due delivery jobs than this counts as "many".
SCALING_BACKLOG = 100


@blueprint.get("/health")
def health() -> Response:
    return jsonify(
        status="ok", name="busbar", version=version(), layout=LAYOUT, hiredis=hiredis_available()
    )


@blueprint.get("/pulse")
@allow("root", "client")
def pulse() -> Response | tuple[str, int]:
    try:
        web_context().redis.ping()
    except redis.RedisError:
        return error_response(503, "Redis does not answer")
    return "", 204


@blueprint.get("/pulse/scaling")
@allow("root", "client")
def pulse_scaling() -> tuple[str, int]:
    """Slow while jobs back up, but in at most half the process's threads at once: past
    that, the answer comes at once, so probes (or a client hammering this) can never
    hold every thread and stall publishing."""
    ctx = web_context()
    if due_jobs(ctx.redis, ctx.keys) > SCALING_BACKLOG and ctx.scaling_waits.acquire(False):
        try:
            time.sleep(1)
        finally:
            ctx.scaling_waits.release()
    return "", 204


def due_jobs(client: redis.Redis, keys: Keys) -> int:
    """Delivery jobs due now, over every shard."""
    pipe = client.pipeline(transaction=False)
    now = now_ms()
    for shard in keys.all_shards():
        pipe.llen(shard.jobs_instant(MAIN))
        pipe.zcount(shard.jobs_scheduled(MAIN), "-inf", now)
    return sum(int(n) for n in pipe.execute())
