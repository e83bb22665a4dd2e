"""Reading JSON request bodies strictly, with messages that say what is wrong.

Routemaster clients do not always send `Content-Type: application/json`, so the body is
parsed whatever the header says. NaN and Infinity are refused: they are not JSON and
would come back out as invalid JSON to subscribers.
"""

from __future__ import annotations

import json
from typing import Any

from flask import request

from app.errors import InvalidInput


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def json_body() -> Any:
    raw = request.get_data(cache=False)
    if not raw.strip():
        raise InvalidInput("request body is empty; expected JSON")
    try:
        return json.loads(raw, parse_constant=_no_constants)
    except (ValueError, RecursionError) as exc:
        raise InvalidInput(f"request body is not valid JSON: {exc}") from None


def json_object(allowed: set[str], required: set[str] = frozenset()) -> dict[str, Any]:
    """A JSON object with only known keys, so typos fail loudly instead of being ignored."""
    body = json_body()
    if not isinstance(body, dict):
        raise InvalidInput("request body must be a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidInput(f"unknown key(s): {', '.join(unknown)}")
    missing = sorted(required - set(body))
    if missing:
        raise InvalidInput(f"missing key(s): {', '.join(missing)}")
    return body
