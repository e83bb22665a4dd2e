"""Signing secrets: a client reads and rotates its own; root rotates anyone's, by name.

Root never reads a secret: its rotation answers 204 and the client reads the new one
with its own token. Root addresses a subscriber by its client's name, as the dead
letters do (no token travels in a URL); /subscriptions/<name>/... is the same.
Answers carrying a secret are marked `Cache-Control: no-store`.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.clock import now_ms
from app.errors import InvalidInput
from app.models.secrets import SecretStore
from app.web.auth import allow, principal
from app.web.body import read_body
from app.web.context import web_context
from app.web.deadletters import subscriber_named

blueprint = Blueprint("secrets", __name__)


def store() -> SecretStore:
    ctx = web_context()
    return SecretStore(ctx.keys, ctx.scripts, ctx.settings.signing_key)


def secret_answer(payload: dict[str, object]) -> Response:
    response = jsonify(payload)
    response.headers["Cache-Control"] = "no-store"
    return response


def no_body() -> None:
    if read_body().strip():
        raise InvalidInput("this endpoint takes no request body")


@blueprint.get("/subscriber/secret")
@allow("client")
def own_secret() -> Response:
    return secret_answer(store().get(principal().token, now_ms()).describe())


@blueprint.post("/subscriber/secret/rotate")
@allow("client")
def rotate_own() -> Response:
    no_body()
    grace = web_context().settings.secret_grace_s
    return secret_answer(store().rotate(principal().token, now_ms(), grace).describe())


@blueprint.post("/subscribers/<path:client>/secret/rotate")
@blueprint.post("/subscriptions/<path:client>/secret/rotate")
@allow("root")
def rotate_named(client: str) -> tuple[str, int]:
    no_body()
    token = subscriber_named(client)
    store().rotate(token, now_ms(), web_context().settings.secret_grace_s)
    return "", 204
