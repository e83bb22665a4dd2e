"""The OpenAPI of transforms: POST /transforms/test.

A transform is a JSONata expression (docs/transforms.md); the answer carries either the
output (any JSON value; null with `dropped` true when the transform drops the event) or
why the evaluation failed, and always the time it took.
"""

from __future__ import annotations

from app.models.schema import Doc
from app.web.openapi_parts import CLIENT, ROOT, operation, ref


def transforms_paths() -> dict[str, Doc]:
    tried = operation(
        "run a transform on an event, as a route would (nothing is stored)",
        f"{CLIENT} or {ROOT}", {200: ref("TransformTested")}, (400, 413),
        body=ref("TransformTest"),
    )  # fmt: skip
    return {"/transforms/test": {"post": tried}}


def transforms_schemas() -> dict[str, Doc]:
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
        "TransformTested": {
            "type": "object",
            "required": ["took_ms"],
            "properties": {
                "output": {"nullable": True, "description": "the new data (any JSON value)"},
                "dropped": {"type": "boolean", "description": "true: the event is not sent"},
                "failed": failed,
                "took_ms": {"type": "number"},
            },
        },
    }
