"""GET /metrics: Prometheus text format, for the root key."""

from __future__ import annotations

from flask import Blueprint, Response

from app.services import metrics
from app.web.auth import allow
from app.web.context import services

blueprint = Blueprint("metrics", __name__)


@blueprint.get("/metrics")
@allow("root")
def prometheus() -> Response:
    ctx = services()
    body = metrics.prometheus(metrics.collect(ctx.redis, ctx.keys, ctx.settings))
    return Response(
        body, mimetype="text/plain", content_type="text/plain; version=0.0.4; charset=utf-8"
    )
