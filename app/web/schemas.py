"""/topics/<topic>/schemas: the JSON Schemas a topic's publishes are checked against.

The topic's publisher or the root key sets (PUT, the body is the schema itself),
removes (DELETE) and deprecates (PATCH a version) them; any client reads them, so a
subscriber can learn what it will be sent. A client's first PUT on a topic nobody has
published to claims it, as a first publish does. The rules: app/models/schemas.py; the
storage: app/services/schemas.py; the page: docs/filters.md.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.clock import now_ms
from app.errors import InvalidInput
from app.models import validate
from app.models.schemas import schema_bounds
from app.services.schemas import SchemaStore
from app.web.auth import allow, caller
from app.web.body import json_body
from app.web.context import web_context

blueprint = Blueprint("schemas", __name__)


def store() -> SchemaStore:
    ctx = web_context()
    return SchemaStore(ctx.redis, ctx.keys, ctx.scripts)


def topic_of(name: str) -> str:
    return validate.topic_name(name, "topic name")


@blueprint.get("/topics/<name>/schemas")
@allow("client", "root")
def list_schemas(name: str) -> Response:
    return jsonify(store().listing(topic_of(name)))


@blueprint.get("/topics/<name>/schemas/<event_type>")
@allow("client", "root")
def read_schema(name: str, event_type: str) -> Response:
    return jsonify(store().read(topic_of(name), event_type))


@blueprint.get("/topics/<name>/schemas/<event_type>/versions/<int:version>")
@allow("client", "root")
def read_version(name: str, event_type: str, version: int) -> Response:
    return jsonify(store().read(topic_of(name), event_type, version))


@blueprint.put("/topics/<name>/schemas/<event_type>")
@allow("client", "root")
def put_schema(name: str, event_type: str) -> Response:
    bounds = schema_bounds(web_context().settings)
    found = store().put(topic_of(name), caller(), event_type, json_body(), bounds, now_ms())
    return jsonify(found)


@blueprint.delete("/topics/<name>/schemas/<event_type>")
@allow("client", "root")
def delete_schema(name: str, event_type: str) -> tuple[str, int]:
    store().delete(topic_of(name), caller(), event_type)
    return "", 204


@blueprint.patch("/topics/<name>/schemas/<event_type>/versions/<int:version>")
@allow("client", "root")
def deprecate(name: str, event_type: str, version: int) -> Response:
    body = json_body()
    if not isinstance(body, dict) or set(body) != {"deprecated"}:
        raise InvalidInput('the body must be {"deprecated": true} or {"deprecated": false}')
    if not isinstance(body["deprecated"], bool):
        raise InvalidInput("deprecated must be true or false")
    found = store().deprecate(topic_of(name), caller(), event_type, version, body["deprecated"])
    return jsonify(found)
