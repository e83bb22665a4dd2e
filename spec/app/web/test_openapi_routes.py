"""Every route the Flask app serves is in the OpenAPI document it serves, with the same
methods, and the document describes no route the app lacks."""

from __future__ import annotations

import re

from flask import Flask
from flask.testing import FlaskClient

IGNORED_METHODS = {"HEAD", "OPTIONS"}


def served(app: Flask) -> dict[str, set[str]]:
    routes: dict[str, set[str]] = {}
    for rule in app.url_map.iter_rules():
        path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule.rule).rstrip("/") or "/"
        routes.setdefault(path, set()).update(set(rule.methods or ()) - IGNORED_METHODS)
    return routes


def test_every_route_is_documented_and_every_documented_route_served(
    app: Flask, http: FlaskClient
) -> None:
    paths = http.get("/openapi.json").get_json()["paths"]
    documented = {
        path.rstrip("/") or "/": {m.upper() for m in operations if m != "parameters"}
        for path, operations in paths.items()
    }
    assert served(app) == documented


def test_each_kinds_listing_is_what_the_published_listing_schema_allows():
    """GET /subscriptions' schema (app/web/openapi/document.py) takes every kind's
    listed destination, its secrets as set (schemathesis found SQS's refused once)."""
    import jsonschema_rs

    from app.models.destination import described, parse
    from app.models.destination_types import described_types
    from app.models.fields import Rules
    from app.models.sealed import Sealer
    from app.web.openapi.document import response_schemas

    schema = response_schemas()["SubscriptionInfo"]["properties"]["destination"]
    validator = jsonschema_rs.validator_for(schema)
    sealer = Sealer(b"k" * 32)
    for kind in described_types():
        example = {f["name"]: f["example"] for f in kind["fields"] if f["name"] != "token"}
        made = parse({"type": kind["type"], **example}, "destination", Rules())
        listed = described(made.stored(sealer, "tok-1", 1))
        assert validator.is_valid(listed), (kind["type"], list(validator.iter_errors(listed)))
