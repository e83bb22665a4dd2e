"""Dead letters: what a subscriber failed to take, to read, replay or drop.

A client reaches its own under /subscriber/deadletters; the root key reaches any
subscriber's under /subscribers/<client name>/deadletters (by name, so that no token
travels in a URL; a name two subscribing clients share is a 409).
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.clock import now_ms
from app.models.subscribers import subscriber_named as named
from app.web.auth import allow, principal
from app.web.context import web_context
from app.web.turns import Turns, collections_held, json_array

blueprint = Blueprint("deadletters", __name__)


def subscriber_named(name: str) -> str:
    """The token of the one subscribing client with that name (404 for none, 409 for
    two: app/models/subscribers.py)."""
    ctx = web_context()
    return named(ctx.tokens, ctx.subscribers, name)


def listing(token: str) -> Response:
    """Up to 10,000 letters with their events: read and encoded with turns
    (app/web/turns.py)."""
    turns = Turns()
    with collections_held():
        return json_array([web_context().deadletters.list(token, turns.take)], turns)


def replay(token: str) -> tuple[Response, int]:
    count = web_context().deadletters.replay(token, now_ms())
    return jsonify(replayed=count), 202


def purge(token: str) -> tuple[str, int]:
    web_context().deadletters.clear(token)
    return "", 204


@blueprint.get("/subscriber/deadletters")
@allow("client")
def list_own() -> Response:
    return listing(principal().token)


@blueprint.post("/subscriber/deadletters/replay")
@allow("client")
def replay_own() -> tuple[Response, int]:
    return replay(principal().token)


@blueprint.delete("/subscriber/deadletters")
@allow("client")
def purge_own() -> tuple[str, int]:
    return purge(principal().token)


@blueprint.get("/subscribers/<path:client>/deadletters")
@allow("root")
def list_named(client: str) -> Response:
    return listing(subscriber_named(client))


@blueprint.post("/subscribers/<path:client>/deadletters/replay")
@allow("root")
def replay_named(client: str) -> tuple[Response, int]:
    return replay(subscriber_named(client))


@blueprint.delete("/subscribers/<path:client>/deadletters")
@allow("root")
def purge_named(client: str) -> tuple[str, int]:
    return purge(subscriber_named(client))
