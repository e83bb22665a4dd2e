"""What a schema check reports (app/models/schema_faults.py): a schema the meta-schema
refuses names the JSON pointer into the schema and the real fault (never the bare "is
not valid under any of the schemas listed in the 'anyOf' keyword"); an event that breaks
a schema's `anyOf`/`oneOf` is reported at the branch that explains it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.errors import InvalidInput
from app.models.schema_faults import Fault
from app.models.schemas import SchemaBounds, parse_schema, stored_schema

TYPES = '"array", "boolean", "integer", "null", "number", "object", "string"'


def refused(schema: Any) -> str:
    with pytest.raises(InvalidInput) as raised:
        parse_schema(schema, SchemaBounds())
    assert "anyOf" not in raised.value.message
    return raised.value.message


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            {"properties": {"total": {"type": "numbr"}}},
            f'schema invalid at /properties/total/type: "numbr" is not one of {TYPES}',
        ),
        (
            {"properties": {"total": {"type": ["number", "strin"]}}},
            f'schema invalid at /properties/total/type/1: "strin" is not one of {TYPES}',
        ),
        (
            {"allOf": [{}, {"items": {"type": 3}}]},
            f"schema invalid at /allOf/1/items/type: 3 is not one of {TYPES}",
        ),
        (
            {"properties": {"total": {"minimum": "0"}}},
            'schema invalid at /properties/total/minimum: "0" is not of type "number"',
        ),
        ({"required": ["a", 1]}, 'schema invalid at /required/1: 1 is not of type "string"'),
        (
            {"properties": {"a": {"$ref": "#/$defs/nope"}}},
            "schema invalid at /properties/a/$ref: Pointer '/$defs/nope' does not exist",
        ),
    ],
)
def test_an_invalid_schema_names_the_pointer_into_it_and_the_fault(schema: Any, message: str):
    assert refused(schema) == message


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("(a)\\1", "invalid escape sequence: \\1 (a backreference: "),
        ("^(?!test)", "invalid perl operator: (?! (a lookaround: "),
        ("(?<=a)b", "invalid perl operator: (?<= (a lookaround: "),
        ("(a", "missing ): (a"),
    ],
)
def test_a_pattern_the_engine_refuses_says_why(pattern: str, why: str):
    message = refused({"properties": {"sku": {"type": "string", "pattern": pattern}}})
    assert message.startswith(
        f"schema invalid at /properties/sku/pattern: {json.dumps(pattern)} is not a pattern "
        f"busbar can run: {why}"
    )
    if "(a " in why:
        assert message.endswith("so no backreferences and no lookaround)")


def test_a_pattern_property_name_is_checked_as_a_pattern_too():
    message = refused({"patternProperties": {"^(?=x)": {}}})
    assert message.startswith('schema invalid at /patternProperties/^(?=x): "^(?=x)" is not a')
    assert "a lookaround" in message


ORDER = {
    "type": "object",
    "properties": {
        "pay": {
            "oneOf": [
                {"type": "object", "required": ["card"],
                 "properties": {"card": {"type": "string", "pattern": "^[0-9]{16}$"}}},
                {"type": "object", "required": ["iban"]},
            ]
        },
        "amount": {"anyOf": [{"type": "integer", "minimum": 0},
                             {"type": "string", "pattern": "^[0-9]+$"}]},
        "currency": {"enum": ["EUR", "USD", "GBP", "JPY", "CHF", "SEK"]},
    },
}  # fmt: skip


def broken(data: Any) -> Fault | None:
    return stored_schema(1, json.dumps(ORDER), False).broken(data)


@pytest.mark.parametrize(
    ("data", "fault"),
    [
        # the value is an integer: the string branch is not the one meant
        ({"amount": -1}, Fault("/amount", "/properties/amount/anyOf/0/minimum",
                               "-1 is less than the minimum of 0")),
        ({"amount": "x"}, Fault("/amount", "/properties/amount/anyOf/1/pattern",
                                '"x" does not match "^[0-9]+$"')),
        # the card branch got deeper into the value than the iban one
        ({"pay": {"card": "12"}}, Fault("/pay/card",
                                        "/properties/pay/oneOf/0/properties/card/pattern",
                                        '"12" does not match "^[0-9]{16}$"')),
        # no branch takes a boolean: say which types would do
        ({"amount": True}, Fault("/amount", "/properties/amount/anyOf",
                                 'true is not of type "integer" or "string"')),
        # neither branch is nearer: both are named
        ({"pay": {}}, Fault("/pay", "/properties/pay/oneOf",
                            '{} matches none of the oneOf schemas: "card" is a required '
                            'property; or "iban" is a required property')),
        # every candidate, not "or 4 other candidates"
        ({"currency": "eur"}, Fault("/currency", "/properties/currency/enum",
                                    '"eur" is not one of "EUR", "USD", "GBP", "JPY", "CHF", '
                                    '"SEK"')),
        ({"amount": 3, "pay": {"iban": "x"}}, None),
    ],
)  # fmt: skip
def test_an_event_that_breaks_an_any_of_is_reported_at_the_branch_meant(
    data: Any, fault: Fault | None
):
    assert broken(data) == fault


def test_a_long_message_is_cut():
    schema = stored_schema(1, json.dumps({"enum": [f"value-{i}" for i in range(200)]}), False)
    found = schema.broken("nope")
    assert found is not None and found.message.endswith("...") and len(found.message) == 303
