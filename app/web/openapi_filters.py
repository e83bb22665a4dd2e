"""The OpenAPI of content filters: POST /filters/test.

A filter is a free-form object in the schema (its grammar, operators and bounds are in
docs/filters.md and each refusal's message); the events are objects of which a filter
reads `type`, `url`, `key` and `data`.
"""

from __future__ import annotations

from app.models.filters import OPERATORS
from app.models.schema import Doc
from app.web.filters import MAX_TEST_EVENTS
from app.web.openapi_parts import CLIENT, ROOT, obj, operation, ref


def filters_paths() -> dict[str, Doc]:
    tried = operation(
        "match a content filter against events, as a route would (nothing is stored)",
        f"{CLIENT} or {ROOT}", {200: ref("FilterTested")}, (400, 413), body=ref("FilterTest"),
    )  # fmt: skip
    return {"/filters/test": {"post": tried}}


def filters_schemas() -> dict[str, Doc]:
    filter_ = {
        "type": "object",
        "description": (
            "keys: type, url, key, data, data.<path>, or $and, $or (lists of filters) and "
            "$not (a filter); values: a literal (equality) or an object of operators: "
            + ", ".join(OPERATORS)
        ),
    }
    return {
        "Filter": filter_,
        "FilterTest": {
            "type": "object",
            "required": ["filter", "events"],
            "additionalProperties": False,
            "properties": {
                "filter": ref("Filter"),
                "events": {
                    "type": "array",
                    "maxItems": MAX_TEST_EVENTS,
                    "items": {"type": "object"},
                },
            },
        },
        "FilterTested": obj({"matches": {"type": "array", "items": {"type": "boolean"}}}),
    }
