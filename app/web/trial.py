"""POST /subscription/test (a client, its own) and POST /subscribers/<name>/test (root,
by client name): one authenticated request to the callback, and what came back
(app/delivery/trial.py). No body; 404 when there is no subscription."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.delivery.trial import attempt
from app.errors import NotFound
from app.models.push_keys import PushKeys
from app.redis_client import text
from app.web.auth import allow, principal
from app.web.context import web_context
from app.web.deadletters import subscriber_named
from app.web.secrets import no_body

blueprint = Blueprint("trial", __name__)
FIELDS = ("callback", "uuid", "name", "headers", "auth", "client_cert", "secret_salt",
          "previous_salt", "previous_until", "partitions", "destination")  # fmt: skip


def tried(token: str) -> Response:
    no_body()
    ctx = web_context()
    stored = ctx.redis.hmget(ctx.keys.subscriber(token), FIELDS)
    fields = {name: text(v) for name, v in zip(FIELDS, stored, strict=True) if v is not None}
    if "callback" not in fields:
        raise NotFound("no subscription for this client")
    keys = PushKeys(ctx.redis, ctx.keys, ctx.scripts, ctx.sealer)
    trial = attempt(ctx.settings, fields, token, keys, ctx.sealer)
    return jsonify(trial.describe())


@blueprint.post("/subscription/test")
@blueprint.post("/subscriber/test")
@allow("client")
def test_own() -> Response:
    return tried(principal().token)


@blueprint.post("/subscribers/<path:client>/test")
@allow("root")
def test_named(client: str) -> Response:
    return tried(subscriber_named(client))
