"""POST /filters/test: try a content filter on events before subscribing with it.

Any client (or root) may ask; nothing is stored and Redis is not asked. The filter is
parsed exactly as a route's would be (app/models/filters.py, with the bus's bounds), so
a filter this accepts is one a subscription accepts, and a 400 here is the one a
subscription would get. Events are matched as given: a filter sees their `type`, `url`,
`key` and `data`, and nothing else of them is checked.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify

from app.errors import InvalidInput
from app.models.filters import filter_bounds, parse_filter, view_of
from app.web.auth import allow
from app.web.body import json_body
from app.web.context import web_context

blueprint = Blueprint("filters", __name__)
MAX_TEST_EVENTS = 100


@blueprint.post("/filters/test")
@allow("client", "root")
def test_filter() -> Response:
    body = json_body()
    if not isinstance(body, dict):
        raise InvalidInput('the body must be an object: {"filter": {...}, "events": [...]}')
    unknown = sorted(set(body) - {"filter", "events"})
    if unknown:
        raise InvalidInput(f"unknown field {unknown[0]!r}: the body holds filter and events")
    if "filter" not in body:
        raise InvalidInput("filter is required")
    matcher = parse_filter(body["filter"], "filter", filter_bounds(web_context().settings))
    tested = events(body.get("events"))
    return jsonify({"matches": [matcher.matches(view_of(e)) for e in tested]})


def events(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise InvalidInput("events must be a list of event objects")
    if len(raw) > MAX_TEST_EVENTS:
        raise InvalidInput(f"events holds at most {MAX_TEST_EVENTS}; this one holds {len(raw)}")
    for i, event in enumerate(raw):
        if not isinstance(event, dict):
            raise InvalidInput(f"events[{i}] must be an event object")
    return raw
