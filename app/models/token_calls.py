"""The token scripts' calls and replies, typed: creating a client or adding a token to
one (api_token_create), and renaming a client (client_rename). Each reply is read into
what the caller does next, an error already naming the problem; forgetting a client is
the catalog step of its deletion (subscriber_calls.unroute)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from app.errors import Conflict, NotFound
from app.lua.call import Call
from app.models.keys import Keys
from app.redis_client import text


class Created(NamedTuple):
    client: str  # the key of the client the token acts as
    operator: bool


def _name(name: str) -> str:
    return name[:80]


def _created(name: str) -> Callable[[Any], Created]:
    def read(reply: Any) -> Created:
        status = int(reply[0])
        if status == 1:
            return Created(text(reply[1]), bool(int(reply[2])))
        if status == -1:
            raise Conflict("token already belongs to another client")
        if status == -2:
            raise Conflict(
                f"a client named {_name(name)} exists: names are one client's; to give it "
                'another token, post {"name": ..., "add": true}'
            )
        if status == -3:
            raise Conflict("that token was deleted from its client; choose another token")
        if status == -4:
            raise NotFound(f"no client named {_name(name)} to add a token to")
        raise Conflict(
            f"{int(reply[1])} clients are named {_name(name)}, made before names were one "
            "client's: rename all but one first (busbar clients shared, busbar clients rename)"
        )

    return read


def create(keys: Keys, name: str, token: str, add: bool, operator: bool | None) -> Call[Created]:
    """api_token_create; its reply raises Conflict or NotFound when nothing was written."""
    mark = "" if operator is None else ("1" if operator else "0")
    return Call(
        "api_token_create",
        [keys.tokens, keys.aliases, keys.names, keys.operators],
        [name, token, "1" if add else "0", mark],
        _created(name),
    )


class Renamed(NamedTuple):
    old: str  # the name it had
    changed: bool  # False: it had the new name already (a repeat)


def _renamed(name: str) -> Callable[[Any], Renamed]:
    def read(reply: Any) -> Renamed:
        status = int(reply[0])
        if status == -1:
            raise NotFound("no such client")
        if status == -2:
            raise Conflict(f"another client is named {_name(name)}; choose another name")
        return Renamed(text(reply[1]), status == 1)

    return read


def rename(keys: Keys, key: str, name: str) -> Call[Renamed]:
    """client_rename, the catalog step of a rename; raises NotFound or Conflict."""
    return Call("client_rename", [keys.tokens, keys.names], [key, name], _renamed(name))
