"""Liveness and readiness: /health needs nothing, /pulse proves Redis answers."""

from __future__ import annotations

from importlib import metadata

import redis
from flask import Blueprint, Response, jsonify

from app.redis_client import hiredis_available
from app.web.auth import allow
from app.web.context import services
from app.web.errors import error_response

blueprint = Blueprint("health", __name__)


def _version() -> str:
    try:
        return metadata.version("busbar")
    except metadata.PackageNotFoundError:
        return "unknown"


@blueprint.get("/health")
def health() -> Response:
    return jsonify(status="ok", name="busbar", version=_version(), hiredis=hiredis_available())


@blueprint.get("/pulse")
@allow("root", "client")
def pulse() -> Response | tuple[str, int]:
    try:
        services().redis.ping()
    except redis.RedisError:
        return error_response(503, "Redis does not answer")
    return "", 204
