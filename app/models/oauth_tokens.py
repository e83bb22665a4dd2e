"""The bus-wide cache of subscribers' OAuth2 access tokens (oauth_token.lua): what a
worker asks it, and how its answers read. One worker at a time fetches a subscriber's
token (it holds the claim for CLAIM_MS at most); the others use the one stored, so a
token endpoint sees one request per token lifetime, however many workers there are.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any, NamedTuple

from app.lua.call import Call
from app.models.keys import Keys

CLAIM_MS = 30_000  # a fetch claimed and never finished (its worker died) frees after this


class Action(StrEnum):
    """What oauth_token.lua tells the worker to do."""

    TOKEN = "token"  # use `sealed`
    FETCH = "fetch"  # this worker fetches; `sealed` is the former token while still valid
    WAIT = "wait"  # another worker fetches, until `until`
    DONE = "done"  # put or release: nothing more


class Cached(NamedTuple):
    """oauth_token.lua's answer: its action, and what goes with it."""

    action: Action
    sealed: str = ""
    refresh_at: int = 0
    until: int = 0  # the token's expiry; for 'wait', the claim's


def _cached(reply: Any) -> Cached:
    fields = [f.decode() if isinstance(f, bytes) else str(f) for f in reply]
    action = Action(fields[0])
    if action is Action.TOKEN:
        return Cached(action, fields[1], int(fields[2]), int(fields[3]))
    if action is Action.FETCH:
        return Cached(action, fields[1], 0, int(fields[2]))
    if action is Action.WAIT:
        return Cached(action, "", 0, int(fields[1]))
    return Cached(action)


def get(keys: Keys, token: str, now: int, fp: str, worker: str) -> Call[Cached]:
    """The cached token, or the claim to fetch one."""
    return Call("oauth_token", [keys.oauth_token(token)], ["get", now, fp, worker, CLAIM_MS],
                _cached)  # fmt: skip


def digest(access_token: str) -> str:
    """How the cache names a token without holding it in the clear."""
    return hashlib.sha256(access_token.encode()).hexdigest()[:32]


def drop(keys: Keys, token: str, now: int, fp: str, worker: str, refused: str) -> Call[Cached]:
    """After a 401: forget the token whose digest is `refused` if it is still the one
    cached, then as get()."""
    args: list[object] = ["drop", now, fp, worker, CLAIM_MS, refused]
    return Call("oauth_token", [keys.oauth_token(token)], args, _cached)


def put(
    keys: Keys, token: str, now: int, fp: str, worker: str, sealed: str, refresh_at: int,
    expires_at: int, named: str,
) -> Call[Cached]:  # fmt: skip
    """Store a fetched token (sealed, and `named` by its digest) and release the claim."""
    args: list[object] = [
        "put", now, fp, worker, CLAIM_MS, sealed, refresh_at, expires_at, named,
    ]  # fmt: skip
    return Call("oauth_token", [keys.oauth_token(token)], args, _cached)


def release(keys: Keys, token: str, now: int, fp: str, worker: str) -> Call[Cached]:
    """The fetch failed: another worker (or this one, at the next attempt) may try."""
    args: list[object] = ["release", now, fp, worker, CLAIM_MS]
    return Call("oauth_token", [keys.oauth_token(token)], args, _cached)
