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


def filter_schema() -> Doc:
    """The filter grammar, as far as an OpenAPI 3.0 schema can say it, which is narrower
    than what busbar takes: 3.0 has no propertyNames, so the `data.<path>` keys and
    object literals are in the description only, and `$regex` patterns are plain
    characters here (app/models/filters.py holds the whole grammar and its bounds)."""
    short = {"type": "string", "maxLength": 64}
    scalar = {"anyOf": [short, {"type": "number"}, {"type": "boolean"}]}
    literal = {
        "nullable": True,
        "anyOf": [*scalar["anyOf"], {"type": "array", "maxItems": 4, "items": scalar}],
    }
    order = {"anyOf": [{"type": "number"}, short]}
    values = {"type": "array", "maxItems": 4, "items": literal}
    operators = {
        "type": "object", "minProperties": 1, "additionalProperties": False,
        "properties": {
            "$eq": literal, "$neq": literal, "$gt": order, "$gte": order, "$lt": order,
            "$lte": order, "$in": values, "$nin": values, "$exist": {"type": "boolean"},
            "$prefix": short, "$suffix": short,
            "$regex": {"type": "string", "maxLength": 32, "pattern": "^[A-Za-z0-9 _^$.-]*$"},
        },
    }  # fmt: skip
    filters = {"type": "array", "minItems": 1, "maxItems": 3, "items": ref("Filter")}
    condition = {"anyOf": [literal, operators]}
    return {
        "type": "object",
        "maxProperties": 4,
        "description": (
            "keys: type, url, key, data, data.<path> (dots into nested objects), or $and, "
            "$or (lists of filters) and $not (a filter); values: a literal (equality, an "
            "object one included) or an object of operators: " + ", ".join(OPERATORS)
        ),
        "properties": {
            **{name: condition for name in ("type", "url", "key", "data")},
            "$and": filters,
            "$or": filters,
            "$not": ref("Filter"),
        },
        "additionalProperties": False,
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
