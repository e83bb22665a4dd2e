"""/workers, /origins, /history and /replays (root): what the operator console shows beyond
Routemaster's API.

Both are bus-wide, so only the root key reads them: a client's console shows its own
topics and subscription, never figures about other clients' traffic.
"""

from __future__ import annotations

from dataclasses import asdict

from flask import Blueprint, Response, jsonify

from app.clock import now_ms
from app.services import origin_limits, samples
from app.services.replay import Replays
from app.services.workers import list_workers
from app.web.auth import allow
from app.web.context import web_context

blueprint = Blueprint("monitoring", __name__)


@blueprint.get("/workers")
@allow("root")
def workers() -> Response:
    ctx = web_context()
    found = list_workers(ctx.redis, ctx.keys, ctx.settings.scrub_after_ms)
    return jsonify([asdict(w) for w in found])


@blueprint.get("/origins")
@allow("root")
def origins() -> Response:
    """Callback origins the workers connect to, the busiest first: each one's adaptive
    connection limit summed over the workers, connections open and opening, deliveries
    waiting, its answers' time, and why and when its limit last changed."""
    ctx = web_context()
    return jsonify(origin_limits.described(origin_limits.read(ctx.redis, ctx.keys, now_ms())))


@blueprint.get("/history")
@allow("root")
def history() -> Response:
    ctx = web_context()
    now, points, total = samples.history(ctx.redis, ctx.keys)
    return jsonify(now=now, points=points, total=total)


@blueprint.get("/replays")
@allow("root")
def replays() -> Response:
    """Lake replays (`busbar spark replay`), newest first: who started which, to whom,
    how far each got. Targets by client name; their tokens never."""
    ctx = web_context()
    return jsonify(Replays(ctx.redis, ctx.keys, ctx.scripts).listing())
