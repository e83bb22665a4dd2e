"""The OpenAPI of content filters: POST /filters/test.

A filter is a free-form object in the schema (its grammar, operators and bounds are in
docs/filters.md and each refusal's message); the events are objects of which a filter
reads `type`, `url`, `key` and `data`.
"""

from __future__ import annotations

from app.models.fields import Doc
from app.models.filters import OPERATORS
from app.web.filters import MAX_TEST_EVENTS
from app.web.openapi.parts import CLIENT, ROOT, obj, operation, ref


def filters_paths() -> dict[str, Doc]:
    tried = operation(
        "match a content filter against events, as a route would (nothing is stored)",
        f"{CLIENT} or {ROOT}", {200: ref("FilterTested")}, (400, 413), body=ref("FilterTest"),
    )  # fmt: skip
    return {"/filters/test": {"post": tried}}


def filter_schema() -> Doc:
    """The filter grammar, as far as an OpenAPI 3.0 schema says it cheaply: narrower than
    what busbar takes (app/models/filters.py holds the whole grammar and its bounds; the
    description names it). 3.0 has no propertyNames, so the `data.<path>` keys are in
    the description only; and a schema-driven client (schemathesis) generated requests
    three times slower against a schema that spelled out every operator and nesting."""
    short = {"type": "string", "maxLength": 64}
    operators = {
        "type": "object", "minProperties": 1, "maxProperties": 2, "additionalProperties": False,
        "properties": {
            "$eq": short, "$neq": short, "$gt": {"type": "number"}, "$lte": {"type": "number"},
            "$in": {"type": "array", "maxItems": 3, "items": short}, "$exist": {"type": "boolean"},
            "$prefix": short,
        },
    }  # fmt: skip
    condition = {"anyOf": [short, operators]}
    return {
        "type": "object",
        "maxProperties": 3,
        "additionalProperties": False,
        "description": (
            "keys: type, url, key, data, data.<path> (dots into nested objects), or $and, "
            "$or (lists of filters) and $not (a filter); values: a literal (equality) or an "
            "object of operators: " + ", ".join(OPERATORS) + " (docs/filters.md)"
        ),
        "properties": {name: condition for name in ("type", "url", "key", "data")},
    }


def filters_schemas() -> dict[str, Doc]:
    return {
        "Filter": filter_schema(),
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
