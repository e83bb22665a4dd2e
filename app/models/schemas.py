"""Event schemas: a JSON Schema (draft 2020-12) for the `data` of a topic's events of one
type, checked at publish, so one publisher's malformed data never reaches a subscriber.

A schema is refused before it is stored when it could cost the bus or reach out of it:
over BUSBAR_SCHEMA_MAX_BYTES as compact JSON, nested deeper than BUSBAR_SCHEMA_MAX_DEPTH,
another draft's `$schema`, or a `$ref` (or `$dynamicRef`) that is not local (`#...`):
busbar never fetches a schema from anywhere. It is compiled by jsonschema-rs with no
retriever at all (offline) and its `pattern`s on the linear-time `regex` engine, so no
pattern a publisher's schema holds can backtrack. `format` is an annotation, as draft
2020-12 has it: not checked.

Checking an event gives the first rule it breaks as a JSON pointer into its `data` and
the schema's own pointer to the keyword, for a 400 that says where (docs/filters.md); a
schema the meta-schema refuses is a 400 with the pointer into the schema. Both dig into
an `anyOf` or `oneOf` for the branch that explains the fault (app/models/schema_faults.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jsonschema_rs

from app.errors import InvalidInput
from app.models.schema_faults import MESSAGE_CHARS, Fault, fault, pointer, schema_fault
from config.settings import Settings

DRAFT = "https://json-schema.org/draft/2020-12/schema"
REFERENCES = ("$ref", "$dynamicRef")


@dataclass(frozen=True)
class SchemaBounds:
    max_bytes: int = 65_536  # BUSBAR_SCHEMA_MAX_BYTES
    max_depth: int = 32  # BUSBAR_SCHEMA_MAX_DEPTH


def schema_bounds(settings: Settings) -> SchemaBounds:
    return SchemaBounds(settings.schema_max_bytes, settings.schema_max_depth)


@dataclass(frozen=True, eq=False)
class TypeSchema:
    """One version of a type's schema, compiled."""

    version: int
    deprecated: bool
    validator: Any  # jsonschema_rs.Draft202012Validator (the package ships no types)

    def broken(self, data: Any) -> Fault | None:
        """The first rule `data` breaks: its pointer is where in `data` ('' is data)."""
        for error in self.validator.iter_errors(data):
            return fault(error)
        return None


def parse_schema(raw: Any, bounds: SchemaBounds) -> str:
    """The schema as stored (compact JSON), after every check a stored one must pass;
    InvalidInput naming what is wrong otherwise."""
    if not isinstance(raw, dict | bool):
        raise InvalidInput("a schema is a JSON Schema: an object (or true/false)")
    text = json.dumps(raw, separators=(",", ":"), sort_keys=True)
    if len(text.encode()) > bounds.max_bytes:
        raise InvalidInput(
            f"the schema is {len(text.encode())} bytes as compact JSON; at most "
            f"{bounds.max_bytes} (BUSBAR_SCHEMA_MAX_BYTES)"
        )
    _walk(raw, "", 0, bounds.max_depth)
    declared = raw.get("$schema", DRAFT) if isinstance(raw, dict) else DRAFT
    if not isinstance(declared, str) or declared.rstrip("#") != DRAFT:
        raise InvalidInput(f"$schema: only draft 2020-12 ({DRAFT}) is taken")
    compile_schema(raw)
    return text


def _walk(node: Any, at: str, depth: int, max_depth: int) -> None:
    if depth > max_depth:
        raise InvalidInput(
            f"the schema nests deeper than {max_depth} at {at or '/'} (BUSBAR_SCHEMA_MAX_DEPTH)"
        )
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{at}/{pointer([key])[1:]}"
            if key in REFERENCES and not (isinstance(value, str) and value.startswith("#")):
                raise InvalidInput(
                    f"{here}: only a local {key} (one that starts with '#') is taken; "
                    "busbar fetches no schema from anywhere"
                )
            _walk(value, here, depth + 1, max_depth)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _walk(value, f"{at}/{i}", depth + 1, max_depth)


def compile_schema(raw: Any) -> Any:
    """A validator that never fetches (offline) and matches patterns in linear time."""
    try:
        return jsonschema_rs.Draft202012Validator(
            raw, offline=True, pattern_options=jsonschema_rs.RegexOptions()
        )
    except jsonschema_rs.ValidationError as exc:
        raise InvalidInput(schema_fault(raw, exc)) from None
    except ValueError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid"
        raise InvalidInput(f"schema invalid: {first[:MESSAGE_CHARS]}") from None


def stored_schema(version: int, text: str, deprecated: bool) -> TypeSchema:
    """A schema read back from Redis: it passed parse_schema when it was stored."""
    return TypeSchema(version, deprecated, compile_schema(json.loads(text)))
