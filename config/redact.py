"""Secrets out of what busbar shows: a URL's password, a key's value.

A Redis URL may carry its password (`redis://:pw@host`); it travels through error
messages, `busbar config` and log lines, which end up in terminals, CI logs and log
stores that other people read. Everything that shows a URL shows it through here.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

MASK = "****"


def url(raw: str) -> str:
    """The URL with its password (and a username, which some servers use as a secret
    too) replaced by ****; anything that does not parse is masked whole."""
    try:
        parts = urlsplit(raw)
        has_userinfo = "@" in parts.netloc
    except ValueError:
        return MASK
    if not has_userinfo:
        return raw
    host = parts.netloc.rsplit("@", 1)[1]
    user = parts.username
    shown = f"{user}:{MASK}" if user and parts.password is not None else MASK
    return urlunsplit(parts._replace(netloc=f"{shown}@{host}"))


def secret(raw: str | tuple[str, ...] | None) -> str:
    return "" if not raw else MASK
