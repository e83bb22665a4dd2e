"""The OpenAPI of event schemas: /topics/{name}/schemas and below.

A stored schema is any JSON Schema (draft 2020-12), so the request body of a PUT is a
free-form object here; what busbar refuses in one (size, depth, remote `$ref`) is in
docs/filters.md and each refusal's message.
"""

from __future__ import annotations

from app.codec import EVENT_TYPES
from app.models.fields import Doc
from app.web.openapi.parts import CLIENT, PARAMETERS, ROOT, obj, operation, ref

WHO_CHANGES = f"{CLIENT} of the topic's publisher (a client's first PUT claims a topic) or {ROOT}"


def _params(*names: str) -> list[Doc]:
    schemas = {
        "name": PARAMETERS["name"],
        "event_type": {"type": "string", "enum": list(EVENT_TYPES)},
        "version": {"type": "integer", "minimum": 1},
    }
    return [{"name": n, "in": "path", "required": True, "schema": schemas[n]} for n in names]


def _with(doc: Doc, *names: str) -> Doc:
    return {**doc, "parameters": _params(*names)}


def schemas_paths() -> dict[str, Doc]:
    anyone = f"{CLIENT} or {ROOT}"
    listed = operation(
        "the topic's event schemas: each type's current version and those kept",
        anyone,
        {200: {"type": "array", "items": ref("SchemaSummary")}},
        (400,),
    )
    read = operation(
        "the current schema of the topic's events of one type",
        anyone,
        {200: ref("EventSchema")},
        (400, 404),
    )
    put = operation(
        "store a JSON Schema (draft 2020-12) for the data of the topic's events "
        "of one type: a new version, or the current one when the same",
        WHO_CHANGES,
        {200: ref("EventSchema")},
        (400, 413),
        body={"type": "object"},
    )
    gone = operation(
        "remove the type's schema and every kept version: its publishes are checked no more",
        WHO_CHANGES,
        {204: None},
        (400, 404),
    )
    version = operation(
        "one kept version of the type's schema", anyone, {200: ref("EventSchema")}, (400, 404)
    )
    marked = operation("mark a kept version deprecated, or not (it still checks publishes "
                       "while current)", WHO_CHANGES, {200: ref("EventSchema")}, (400, 404),
                       body=ref("SchemaDeprecation"))  # fmt: skip
    return {
        "/topics/{name}/schemas": {"get": _with(listed, "name")},
        "/topics/{name}/schemas/{event_type}": {
            "get": _with(read, "name", "event_type"),
            "put": _with(put, "name", "event_type"),
            "delete": _with(gone, "name", "event_type"),
        },
        "/topics/{name}/schemas/{event_type}/versions/{version}": {
            "get": _with(version, "name", "event_type", "version"),
            "patch": _with(marked, "name", "event_type", "version"),
        },
    }


def schemas_schemas() -> dict[str, Doc]:
    version = obj({
        "version": {"type": "integer"},
        "at": {"type": "string", "format": "date-time"},
        "deprecated": {"type": "boolean"},
    })  # fmt: skip
    versions = {"type": "array", "items": version}
    summary = obj({**version["properties"], "type": {"type": "string"}, "versions": versions})
    shown = {
        **version["properties"],
        "topic": {"type": "string"},
        "type": {"type": "string"},
        "current": {"type": "integer"},
        "schema": {"description": "the JSON Schema as stored: an object, or true or false"},
        "versions": versions,
    }
    answer = obj(shown)
    answer["properties"]["changed"] = {
        "type": "boolean", "description": "PUT only: whether it stored a new version",
    }  # fmt: skip
    return {
        "SchemaVersion": version,
        "SchemaSummary": summary,
        "EventSchema": answer,
        "SchemaDeprecation": {
            "type": "object",
            "required": ["deprecated"],
            "additionalProperties": False,
            "properties": {"deprecated": {"type": "boolean"}},
        },
    }
