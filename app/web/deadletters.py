"""/subscriber/deadletters: what a subscriber failed to take, to read, replay or drop."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.services.ingest import now_ms
from app.web.auth import allow, principal
from app.web.context import services

blueprint = Blueprint("deadletters", __name__)


@blueprint.get("/subscriber/deadletters")
@allow("client")
def list_dead_letters() -> Response:
    return jsonify(services().deadletters.list(principal().token))


@blueprint.post("/subscriber/deadletters/replay")
@allow("client")
def replay_dead_letters() -> tuple[Response, int]:
    count = services().deadletters.replay(principal().token, now_ms())
    return jsonify(replayed=count), 202


@blueprint.delete("/subscriber/deadletters")
@allow("client")
def clear_dead_letters() -> tuple[str, int]:
    services().deadletters.clear(principal().token)
    return "", 204
