"""What a JSON Schema check found, said where it is and what is wrong.

Two checks meet it: a schema given to PUT .../schemas/<type> against the draft 2020-12
meta-schema, where the instance checked is the user's schema (so the error's instance
path is the pointer into it), and an event's data against its topic's schema.

jsonschema-rs reports a failed `anyOf` or `oneOf` as one error at the keyword ("... is
not valid under any of the schemas listed in the 'anyOf' keyword"), each branch's own
errors in its context. The meta-schema's `type` is one (a type name, or a list of them),
so `"type": "numbr"` read as that sentence, which says neither what nor where. Here the
branch that explains the fault is found, as a reader would: a branch the value is not
even of the type of is not the one meant; of the others, the one that went deepest into
the value (it matched the most on the way); a tie names each. The library's enum message
("or 5 other candidates") lists every candidate, and a refused `pattern` says why.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema_rs

from app.models.regexes import refusal

MESSAGE_CHARS = 300  # a message quotes the value; a large one is cut
REFERENCES = ("$ref", "$dynamicRef", "$id")  # what a resolution error quotes
Kind = jsonschema_rs.ValidationErrorKind
Error = jsonschema_rs.ValidationError


@dataclass(frozen=True)
class Fault:
    """The one thing a 400 reports of a check."""

    pointer: str  # where in the instance checked, as a JSON pointer ('' is the whole)
    rule: str  # the schema's pointer to the keyword broken, e.g. /properties/total/minimum
    message: str


def pointer(path: Sequence[Any]) -> str:
    """RFC 6901: each step after a '/', with '~' and '/' escaped."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def fault(error: Error) -> Fault:
    found, message = _explained(error)
    if len(message) > MESSAGE_CHARS:
        message = message[:MESSAGE_CHARS] + "..."
    return Fault(pointer(found.instance_path), pointer(found.schema_path), message)


def schema_fault(raw: Any, error: Error) -> str:
    """The 400's message for a schema the meta-schema (or the compiler) refuses. A
    reference that does not resolve is reported with no path: it is found by its text."""
    found = fault(error)
    at = found.pointer or _reference_at(raw, error.message)
    return f"schema invalid at {at}: {found.message}" if at else f"schema invalid: {found.message}"


def _explained(error: Error) -> tuple[Error, str]:
    """The error to report (the one given, or one of its branches') and its message."""
    kind = error.kind
    if not isinstance(kind, Kind.AnyOf | Kind.OneOfNotValid):
        return error, _said(error)
    # each branch by its deepest error: where that branch got furthest into the value
    picks = [max(branch, key=_depth) for branch in kind.context if branch]
    if not picks:
        return error, error.message
    meant = [e for e in picks if not _other_type(e, error)]
    if not meant:
        types = dict.fromkeys(t for e in picks for t in _types(e))
        return error, f"{_json(error.instance)} is not of type {' or '.join(map(_json, types))}"
    deepest = max(map(_depth, meant))
    top = [e for e in meant if _depth(e) == deepest]
    if len(top) == 1:
        return _explained(top[0])
    each = "; or ".join(_explained(e)[1] for e in top)
    return error, f"{_json(error.instance)} matches none of the {kind.name} schemas: {each}"


def _depth(error: Error) -> int:
    return len(error.instance_path)


def _other_type(branch: Error, parent: Error) -> bool:
    """A branch that fails only because the value is of another type than it takes."""
    return isinstance(branch.kind, Kind.Type) and branch.instance_path == parent.instance_path


def _types(error: Error) -> list[str]:
    kind = error.kind
    return list(kind.types) if isinstance(kind, Kind.Type) else []


def _said(error: Error) -> str:
    kind, instance = error.kind, error.instance
    if isinstance(kind, Kind.Enum):
        return f"{_json(instance)} is not one of {', '.join(map(_json, kind.options))}"
    if isinstance(kind, Kind.Format) and kind.format == "regex" and isinstance(instance, str):
        why = refusal(instance) or "the linear-time engine patterns run on refuses it"
        return f"{_json(instance)} is not a pattern busbar can run: {why}"
    return error.message


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _reference_at(raw: Any, message: str, at: str = "") -> str:
    """The pointer to the first reference keyword whose value the message quotes."""
    if isinstance(raw, dict):
        for key, value in raw.items():
            here = f"{at}{pointer([key])}"
            if key in REFERENCES and isinstance(value, str) and _quoted(value, message):
                return here
            found = _reference_at(value, message, here)
            if found:
                return found
    elif isinstance(raw, list):
        for i, value in enumerate(raw):
            found = _reference_at(value, message, f"{at}/{i}")
            if found:
                return found
    return ""


def _quoted(reference: str, message: str) -> bool:
    """jsonschema-rs quotes a reference whole ('#/x%zz'), or after its '#' ('/$defs/a')."""
    return f"'{reference}'" in message or f"'{reference.removeprefix('#')}'" in message
