"""Parsers for environment values: each turns a string into a typed value or says why not.

They raise ValueError with a short reason; Settings adds the variable's name, so every
message an operator sees names the variable at fault.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlsplit

Parser = Callable[[str], object]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def boolean(raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"expected one of 1/0, true/false, yes/no, on/off, got {raw!r}")


def integer(low: int | None = None, high: int | None = None) -> Parser:
    def parse(raw: str) -> int:
        try:
            value = int(raw.strip().replace("_", ""))
        except ValueError:
            raise ValueError(f"expected an integer, got {raw!r}") from None
        if low is not None and value < low:
            raise ValueError(f"must be at least {low}, got {value}")
        if high is not None and value > high:
            raise ValueError(f"must be at most {high}, got {value}")
        return value

    return parse


def choice(*options: str) -> Parser:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {raw!r}")
        return value

    return parse


def matching(pattern: str, what: str) -> Parser:
    compiled = re.compile(pattern)

    def parse(raw: str) -> str:
        if not compiled.fullmatch(raw):
            raise ValueError(f"expected {what}, got {raw!r}")
        return raw

    return parse


def redis_url(raw: str) -> str:
    parts = urlsplit(raw.strip())
    if parts.scheme not in {"redis", "rediss", "unix"}:
        raise ValueError(f"expected a redis://, rediss:// or unix:// URL, got {raw!r}")
    if parts.scheme != "unix" and not parts.hostname:
        raise ValueError(f"the URL has no host: {raw!r}")
    return raw.strip()


def secret(raw: str) -> str:
    """A root key travels as an HTTP Basic username, so it cannot hold a colon or spaces;
    it is compared in constant time, but a very short one could still be guessed."""
    value = raw.strip()
    if len(value) < 8:
        raise ValueError("must be at least 8 characters long")
    if any(ord(c) < 33 or ord(c) > 126 or c == ":" for c in value):
        raise ValueError("must be printable ASCII without spaces or colons")
    return value
