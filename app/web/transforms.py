"""POST /transforms/test: try a transform on an event before subscribing with it.

Any client (or root) may ask; nothing is stored and Redis is not asked. The transform is
compiled as a route's will be (app/models/transform.py, with the bus's bounds), so one
this accepts is one a subscription accepts, and its 400 is the one a subscription would
get. The event is given as a subscriber receives it (`topic`, `type`, `url`, `key`,
`t`, `data`); the answer is the output that would replace its `data`, or `dropped` when
the transform gives nothing (the event would not be sent), or why the evaluation failed
(the event would be dead-lettered with reason `transform_failed`), with the time taken.
"""

from __future__ import annotations

import time

from flask import Blueprint, Response, jsonify

from app.errors import InvalidInput
from app.models.transform import TransformFailed, event_data, parse_transform, transform_bounds
from app.web.auth import allow
from app.web.body import json_body
from app.web.context import web_context

blueprint = Blueprint("transforms", __name__)


@blueprint.post("/transforms/test")
@allow("client", "root")
def test_transform() -> Response:
    body = json_body()
    if not isinstance(body, dict):
        raise InvalidInput('the body must be an object: {"transform": "...", "event": {...}}')
    unknown = sorted(set(body) - {"transform", "event"})
    if unknown:
        raise InvalidInput(f"unknown field {unknown[0]!r}: the body holds transform and event")
    if "transform" not in body:
        raise InvalidInput("transform is required")
    settings = web_context().settings
    transform = parse_transform(
        body["transform"], "transform", settings.transform_max_bytes, settings.max_event_data
    )
    event = body.get("event")
    if not isinstance(event, dict):
        raise InvalidInput("event must be an event object, as a subscriber receives it")
    started = time.perf_counter()
    try:
        output = event_data(transform.apply(event, transform_bounds(settings)))
    except TransformFailed as failed:
        took = round((time.perf_counter() - started) * 1000, 3)
        why = {"reason": "transform_failed", "bound": failed.bound, "message": failed.message}
        return jsonify({"failed": why, "took_ms": took})
    took = round((time.perf_counter() - started) * 1000, 3)
    return jsonify({"output": output, "dropped": output is None, "took_ms": took})
