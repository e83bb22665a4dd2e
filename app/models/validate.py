"""Small checks shared by event and subscription validation, each naming its field."""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
from typing import Any

from app.errors import InvalidInput

TOPIC_PATTERN = re.compile(r"[a-z_]{1,64}")
MAX_URL = 1024
_SPACE_OR_CONTROL = re.compile(r"[\x00-\x20\x7f]")


def digits(text: str) -> bool:
    """Only ASCII 0-9, at least one: `str.isdigit` also takes `²` and other Unicode
    digits, which `int()` refuses (a `?limit=²` was a 500) or reads as numbers."""
    return text.isascii() and text.isdigit()


# The one definition of the URLs the API takes (events' `url`, callbacks): the validator
# matches it and GET /openapi.json publishes it, so a URL one accepts the other does too.
# ASCII only; a host is a name (any case, RFC 3986 characters) or a bracketed IPv6
# address; after it anything printable but `?` (no query string), of any length up to
# MAX_URL. Written in the regex subset both Python and ECMA-262 (OpenAPI) read alike.
_HEX4 = "[0-9A-Fa-f]{1,4}"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"(?:{_OCTET}\.){{3}}{_OCTET}"
_IPV6 = "|".join(
    [
        rf"(?:{_HEX4}:){{7}}{_HEX4}",
        rf"(?:{_HEX4}:){{1,7}}:",
        rf"(?:{_HEX4}:){{1,6}}:{_HEX4}",
        *[rf"(?:{_HEX4}:){{1,{5 - i}}}(?::{_HEX4}){{1,{i + 2}}}" for i in range(4)],
        rf"{_HEX4}:(?::{_HEX4}){{1,6}}",
        rf":(?:(?::{_HEX4}){{1,7}}|:)",
        rf"(?:{_HEX4}:){{6}}{_IPV4}",
        rf"(?:{_HEX4}:){{1,5}}:{_IPV4}",
        rf"::(?:{_HEX4}:){{0,5}}{_IPV4}",
    ]
)
_NAME_CHARS = "A-Za-z0-9._~!$&'()*+,;=%"  # and "-", last in each class to stay literal
_HOST = rf"(?:[{_NAME_CHARS}-]+|\[(?:{_IPV6})\])"
_USERINFO = rf"(?:[{_NAME_CHARS}:-]*@)?"
_REST = r"(?::[0-9]{0,5})?(?:[/#][!->@-~]*)?"


def url_pattern(allow_http: bool, userinfo: bool = True) -> str:
    """The URL rule as a regex: http too when allowed; `userinfo=False` for callbacks."""
    scheme = "https?" if allow_http else "https"
    return f"^{scheme}://{_USERINFO if userinfo else ''}{_HOST}{_REST}$"


_URLS = {(h, u): re.compile(url_pattern(h, u)) for h in (False, True) for u in (False, True)}


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
    """The URL rule (url_pattern), with a message saying which part of it is broken."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string")
    if len(value) > MAX_URL:
        raise InvalidInput(f"{field} must be at most {MAX_URL} characters")
    if _URLS[(allow_http, True)].fullmatch(value):
        return value
    schemes = ("https", "http") if allow_http else ("https",)
    scheme, _, rest = value.partition("://")
    if scheme not in schemes:
        raise InvalidInput(f"{field} must be an {' or '.join(schemes)} URL")
    if "?" in value:
        raise InvalidInput(f"{field} must not have a query string")
    if _SPACE_OR_CONTROL.search(value):
        raise InvalidInput(f"{field} must not contain spaces or control characters")
    if not rest or rest[0] in "/#:?":
        raise InvalidInput(f"{field} must name a host")
    raise InvalidInput(
        f"{field} is not a valid URL: ASCII only, a host name or [IPv6 address], an optional "
        "port, then a path"
    )


def known_keys(body: dict[str, Any], allowed: AbstractSet[str], what: str) -> None:
    if body.keys() <= allowed:  # every event of a bulk publish comes here: no set built
        return
    unknown = sorted(set(body).difference(allowed))
    raise InvalidInput(f"unknown key(s) in {what}: {', '.join(map(str, unknown))}")


PUBLISH_ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def publish_id(value: str | None) -> str | None:
    """An `Idempotency-Key` header: absent, or 1-128 of A-Z a-z 0-9 . _ : -."""
    if value is None:
        return None
    if not PUBLISH_ID_PATTERN.fullmatch(value):
        raise InvalidInput("Idempotency-Key must be 1-128 characters of A-Z a-z 0-9 . _ : -")
    return value
