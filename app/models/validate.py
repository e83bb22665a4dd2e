"""Small checks shared by event and subscription validation, each naming its field."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from app.errors import InvalidInput

TOPIC_PATTERN = re.compile(r"[a-z_]{1,64}")
MAX_URL = 1024
_SPACE_OR_CONTROL = re.compile(r"[\x00-\x20\x7f]")


def topic_name(value: Any, field: str = "topic") -> str:
    if not isinstance(value, str) or not TOPIC_PATTERN.fullmatch(value):
        raise InvalidInput(f"{field} must match ^[a-z_]{{1,64}}$")
    return value


def integer(value: Any, field: str, low: int, high: int | None = None) -> int:
    """JSON integers only: true/false and 1.0 are refused, since they are typos here."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{field} must be an integer")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InvalidInput(f"{field} must be {bound}")
    return value


def url(value: Any, field: str, allow_http: bool) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string")
    if len(value) > MAX_URL:
        raise InvalidInput(f"{field} must be at most {MAX_URL} characters")
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:
        raise InvalidInput(f"{field} is not a valid URL") from None
    schemes = ("https", "http") if allow_http else ("https",)
    if parts.scheme not in schemes:
        raise InvalidInput(f"{field} must be an {' or '.join(schemes)} URL")
    if not host:
        raise InvalidInput(f"{field} must name a host")
    if parts.query or "?" in value:
        raise InvalidInput(f"{field} must not have a query string")
    if _SPACE_OR_CONTROL.search(value):
        raise InvalidInput(f"{field} must not contain spaces or control characters")
    return value


def known_keys(body: dict[str, Any], allowed: set[str], what: str) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidInput(f"unknown key(s) in {what}: {', '.join(map(str, unknown))}")
