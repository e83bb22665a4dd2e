"""Parsers for environment values: each turns a string into a typed value or says why not.

They raise ValueError with a short reason; Settings adds the variable's name, so every
message an operator sees names the variable at fault.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from config import redact

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
    """Messages show the URL without its password (config/redact.py)."""
    value = raw.strip()
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:
        raise ValueError(f"not a valid URL: {redact.url(value)!r}") from None
    if parts.scheme not in {"redis", "rediss", "unix"}:
        shown = redact.url(value)
        raise ValueError(f"expected a redis://, rediss:// or unix:// URL, got {shown!r}")
    if parts.scheme != "unix" and not host:
        raise ValueError(f"the URL has no host: {redact.url(value)!r}")
    return value


def key(min_length: int) -> Parser:
    """A key of printable ASCII without spaces or colons (a root key travels as an HTTP
    Basic username), long enough not to be guessed."""

    def parse(raw: str) -> str:
        value = raw.strip()
        if len(value) < min_length:
            raise ValueError(f"must be at least {min_length} characters long")
        if any(ord(c) < 33 or ord(c) > 126 or c == ":" for c in value):
            raise ValueError("must be printable ASCII without spaces or colons")
        return value

    return parse


secret = key(8)


def keys(min_length: int) -> Parser:
    """Keys as key() takes them, separated by spaces (a key holds none)."""
    one = key(min_length)

    def parse(raw: str) -> tuple[str, ...]:
        return tuple(str(one(part)) for part in raw.split())

    return parse


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(raw: str) -> tuple[Network, ...]:
    """Comma-separated address ranges (`169.254.0.0/16, 168.63.129.16`); `none` for none."""
    if raw.strip().lower() == "none":
        return ()
    found = []
    for item in raw.split(","):
        text = item.strip()
        if not text:
            continue
        try:
            found.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ValueError(f"expected address ranges like 169.254.0.0/16, got {text!r}") from None
    return tuple(found)


_LABEL = "[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?"
_HOST_NAME = re.compile(rf"(\*\.)?({_LABEL}\.)*{_LABEL}")


def allowlist(raw: str) -> tuple[Network | str, ...]:
    """Comma-separated address ranges and host names (`10.0.0.0/8, orders.internal,
    *.svc.cluster.local`); `none` for none. A name is kept lowercased, without a final dot."""
    if raw.strip().lower() == "none":
        return ()
    found: list[Network | str] = []
    for item in raw.split(","):
        text = item.strip().lower().rstrip(".")
        if not text:
            continue
        try:
            found.append(ipaddress.ip_network(text, strict=False))
            continue
        except ValueError:
            pass
        if not _HOST_NAME.fullmatch(text) or text.replace(".", "").isdigit():
            raise ValueError(
                f"expected address ranges like 10.0.0.0/8 or host names like "
                f"orders.internal or *.svc.cluster.local, got {item.strip()!r}"
            )
        found.append(text)
    return tuple(found)


def readable_file(raw: str) -> str:
    path = Path(raw.strip()).expanduser()
    if not path.is_file():
        raise ValueError(f"no such file: {raw.strip()!r}")
    if not os.access(path, os.R_OK):
        raise ValueError(f"cannot read {raw.strip()!r}")
    return str(path)
