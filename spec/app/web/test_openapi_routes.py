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
