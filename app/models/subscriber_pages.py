"""GET /subscriptions a page at a time: a bus of thousands of subscribers answers its
listing in full (Routemaster's clients expect every entry), but an operator's console or
script asks for `?limit` entries `?after` the last one it has, and the web reads only
those.

Entries come in the order of their clients' names (what a person scans), a name shared
by clients made before names were unique (docs/operating.md) broken by a digest of the
token. The cursor names that place: the name (its UTF-8 in hex) and the digest, never the
token itself, since a URL ends up in proxies' logs. A cursor stays valid while its subscriber
is deleted or renamed: the next page starts after the place, wherever the others now are.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from dataclasses import dataclass

from app.errors import InvalidInput
from app.models.tokens import MAX_NAME
from app.models.validate import digits

MOST = 1000  # entries a page holds at most
CURSOR_PATTERN = f"^(?:[0-9a-f]{{2}}){{0,{4 * MAX_NAME}}}\\.[0-9a-f]{{16}}$"
CURSOR = re.compile(CURSOR_PATTERN.removeprefix("^").removesuffix("$"))
PARAMETERS = ("limit", "after")


@dataclass(frozen=True)
class PageQuery:
    limit: int
    after: tuple[str, str] | None  # (name, digest) of the place a page starts after


@dataclass(frozen=True)
class Page:
    tokens: list[str]
    next: str | None  # the cursor of the page after, None on the last


def place(token: str, name: str | None) -> tuple[str, str]:
    """Where a subscriber stands in the order: its name, then a digest of its token."""
    return name or "", hashlib.sha256(token.encode()).hexdigest()[:16]


def cursor(at: tuple[str, str]) -> str:
    """The name's UTF-8 in hex, a dot, the digest: CURSOR describes every one, and any
    text it describes is a place to start after (a name of bytes that are not UTF-8
    stands where its replacement characters sort)."""
    return f"{at[0].encode().hex()}.{at[1]}"


def parse_query(args: dict[str, str]) -> PageQuery | None:
    """The page asked for, None for the whole listing; InvalidInput naming what is wrong."""
    unknown = sorted(set(args) - set(PARAMETERS))
    if unknown:
        raise InvalidInput(f"unknown parameter {unknown[0]!r}: use limit and after")
    if not args:
        return None
    limit = args.get("limit", str(MOST))
    if not digits(limit) or not 1 <= int(limit) <= MOST:
        raise InvalidInput(f"limit must be an integer from 1 to {MOST}")
    after = args.get("after")
    return PageQuery(int(limit), None if after is None else _parse_cursor(after))


def _parse_cursor(text: str) -> tuple[str, str]:
    if CURSOR.fullmatch(text) is None:
        raise InvalidInput("after must be a cursor from a page's Link header (rel=next)")
    name, _, digest = text.partition(".")
    return bytes.fromhex(name).decode(errors="replace"), digest


def _at(entry: tuple[tuple[str, str], str]) -> tuple[str, str]:
    return entry[0]


def page(tokens: list[str], names: dict[str, str], query: PageQuery) -> Page:
    """The tokens of the page asked for, in order, and the cursor of the next."""
    places = sorted((place(t, names.get(t)), t) for t in tokens)
    start = 0 if query.after is None else bisect.bisect_right(places, query.after, key=_at)
    chosen = places[start : start + query.limit]
    more = start + query.limit < len(places)
    return Page([t for _, t in chosen], cursor(chosen[-1][0]) if more and chosen else None)
