"""A subscriber's last delivered event, as published and as sent: what the console
tries a route's transform on (docs/transforms.md, Try it).

A client reaches its own under /subscriber/delivered/last; the root key any
subscriber's under /subscribers/<client name>/delivered/last. 404 when the delivery
log is off or holds none of the subscriber's deliveries among its latest entries
(app/models/delivered.py)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.errors import NotFound
from app.models.delivered import SCAN, last_delivered
from app.redis_client import text
from app.web.auth import allow, principal
from app.web.context import web_context
from app.web.deadletters import subscriber_named

blueprint = Blueprint("delivered", __name__)


def last(token: str) -> Response:
    ctx = web_context()
    name = ctx.redis.hget(ctx.keys.subscriber(token), "name")
    if name is None:
        raise NotFound("no subscription for this client")
    if not ctx.settings.delivery_log:
        raise NotFound("the delivery log is off (BUSBAR_DELIVERY_LOG): no delivery is kept")
    found = last_delivered(ctx.redis, ctx.keys, token, text(name))
    if found is None:
        raise NotFound(f"no delivery to {text(name)} among the last {SCAN:,} of its shard's")
    return jsonify(found.describe())


@blueprint.get("/subscriber/delivered/last")
@allow("client")
def last_own() -> Response:
    return last(principal().token)


@blueprint.get("/subscribers/<path:client>/delivered/last")
@allow("root")
def last_named(client: str) -> Response:
    return last(subscriber_named(client))
