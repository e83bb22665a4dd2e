"""The OpenAPI of transforms: POST /transforms/test, and a subscriber's last delivered
event to try one on (GET /subscriber/delivered/last, root's by client name).

A transform is a JSONata expression (docs/transforms.md); the answer carries either the
output (an object; null with `dropped` true when the transform drops the event) or
why the evaluation failed, and always the time it took.
"""

from __future__ import annotations

from app.models.fields import Doc
from app.web.openapi.parts import CLIENT, ROOT, operation, ref


def transforms_paths() -> dict[str, Doc]:
    tried = operation(
        "run a transform on an event, as a route would (nothing is stored)",
        f"{CLIENT} or {ROOT}", {200: ref("TransformTested")}, (400, 413),
        body=ref("TransformTest"),
    )  # fmt: skip
    found = {200: ref("Delivered")}
    own = operation("the subscriber's last delivered event, as published and as sent",
                    CLIENT, found, (404,))  # fmt: skip
    named = operation("a subscriber's last delivered event, by client name", ROOT, found,
                      (404, 409), name="client")  # fmt: skip
    return {
        "/transforms/test": {"post": tried},
        "/subscriber/delivered/last": {"get": own},
        "/subscribers/{client}/delivered/last": {"get": named},
    }


def transforms_schemas() -> dict[str, Doc]:
    string = {"type": "string"}
    delivered = {
        "type": "object",
        "required": ["topic", "type", "url", "t"],
        "properties": {"topic": string, "type": string, "url": string, "key": string,
                       "t": {"type": "integer"}, "data": {"type": "object"}},
    }  # fmt: skip
    failed = {
        "type": "object",
        "required": ["reason", "bound", "message"],
        "properties": {
            "reason": {"type": "string", "enum": ["transform_failed"]},
            "bound": {"type": "string", "enum": ["time", "depth", "size", "error"]},
            "message": {"type": "string"},
        },
    }
    return {
        "TransformTest": {
            "type": "object",
            "required": ["transform", "event"],
            "additionalProperties": False,
            "properties": {
                "transform": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 65_536,
                    "description": "a JSONata expression (docs/transforms.md); at most "
                    "BUSBAR_TRANSFORM_MAX_BYTES bytes (400 beyond)",
                },
                "event": {
                    "type": "object",
                    "description": "as a subscriber receives it: topic, type, url, key, t, data",
                },
            },
        },
        "Delivered": {
            "type": "object",
            "required": ["event", "sent", "delivered_at"],
            "properties": {
                "event": {**delivered, "description": "as published: what a transform is given"},
                "sent": {**delivered, "description": "as the subscriber received it"},
                "delivered_at": {"type": "integer"},
            },
        },
        "TransformTested": {
            "type": "object",
            "required": ["took_ms"],
            "properties": {
                "output": {
                    "type": "object",
                    "nullable": True,
                    "description": "the new data; null when the event is dropped",
                },
                "dropped": {"type": "boolean", "description": "true: the event is not sent"},
                "failed": failed,
                "took_ms": {"type": "number"},
            },
        },
    }
