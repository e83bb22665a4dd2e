"""Pause and resume a subscriber over HTTP (app/models/pausing.py).

A client pauses its own subscription under /subscriber/pause and /subscriber/resume;
root any subscriber's under /subscribers/<client name>/pause and /resume, by name as
for dead letters. Each answers 200 with the subscriber's `paused` as it is now; both are
safe to repeat.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.clock import now_ms
from app.web.auth import allow, principal
from app.web.context import web_context
from app.web.deadletters import subscriber_named

blueprint = Blueprint("pausing", __name__)


def change(token: str, pause: bool) -> Response:
    pausing, by = web_context().pausing, principal().name
    state = pausing.pause(token, by, now_ms()) if pause else pausing.resume(token, by, now_ms())
    return jsonify(paused=state)


@blueprint.post("/subscriber/pause")
@allow("client")
def pause_own() -> Response:
    return change(principal().token, True)


@blueprint.post("/subscriber/resume")
@allow("client")
def resume_own() -> Response:
    return change(principal().token, False)


@blueprint.post("/subscribers/<path:client>/pause")
@allow("root")
def pause_named(client: str) -> Response:
    return change(subscriber_named(client), True)


@blueprint.post("/subscribers/<path:client>/resume")
@allow("root")
def resume_named(client: str) -> Response:
    return change(subscriber_named(client), False)
