"""API tokens: which clients exist and what they are called.

A token is the client's identity: it is the Basic-auth username, the topic publisher and
the subscriber key. Names are free text for people; tokens follow `^[a-z0-9:_-]{1,64}$`.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

import redis

from app.errors import Conflict, InvalidInput
from app.models.keys import Keys
from app.models.schema import Checked, Shape
from app.redis_client import text

TOKEN_PATTERN = re.compile(r"[a-z0-9:_-]{1,64}")
_SLUG_UNSAFE = re.compile(r"[^a-z0-9:_-]+")
MAX_NAME = 64


@dataclass(frozen=True)
class Token:
    name: str
    token: str
    operator: bool = False  # may subscribe to busbar_operations (app/services/operations.py)


def validate_name(name: object) -> str:
    if not isinstance(name, str):
        raise InvalidInput("name must be a string")
    if not name.strip():
        raise InvalidInput("name must not be empty")
    if len(name) > MAX_NAME:
        raise InvalidInput(f"name must be at most {MAX_NAME} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InvalidInput("name must not contain control characters")
    return name


def validate_token(token: object) -> str:
    if not isinstance(token, str) or not TOKEN_PATTERN.fullmatch(token):
        raise InvalidInput("token must match ^[a-z0-9:_-]{1,64}$")
    return token


def validate_operator(value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput("operator must be true or false")
    return value


TOKEN_REQUEST = Shape(
    {
        "name": Checked(
            validate_name,
            {"type": "string", "minLength": 1, "maxLength": MAX_NAME,
             "pattern": r"^[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f][^\x00-\x1f\x7f]*$"},
            description="free text for people",
        ),
        "token": Checked(
            validate_token,
            {"type": "string", "pattern": f"^{TOKEN_PATTERN.pattern}$"},
            description="made up when absent: <name>--<32 hex>",
        ),
        "operator": Checked(
            validate_operator,
            {"type": "boolean"},
            description="may subscribe to busbar_operations; re-posting an existing "
            "client's name and token with it sets (true) or clears (false) the mark",
        ),
    },
    required=("name",),
)  # fmt: skip


def default_token(name: str) -> str:
    """`<name>--<32 hex>` as Routemaster does, with the name made token-safe and short
    enough that the whole token still fits in 64 characters."""
    slug = _SLUG_UNSAFE.sub("_", name.lower()).strip("_")[:30] or "client"
    return f"{slug}--{secrets.token_hex(16)}"


class TokenStore:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._redis = client
        self._keys = keys

    def all(self) -> list[Token]:
        pipe = self._redis.pipeline(transaction=False)
        pipe.hgetall(self._keys.tokens)
        pipe.smembers(self._keys.operators)
        stored, operators = pipe.execute()
        tokens = [Token(text(v), text(k), k in operators) for k, v in stored.items()]
        return sorted(tokens, key=lambda t: (t.name, t.token))

    def is_operator(self, token: str) -> bool:
        return bool(self._redis.sismember(self._keys.operators, token))

    def name_of(self, token: str) -> str | None:
        name = self._redis.hget(self._keys.tokens, token)
        return None if name is None else text(name)

    def tokens_named(self, name: str) -> list[str]:
        """Names are not unique: every token that carries this one, sorted."""
        stored = self._redis.hgetall(self._keys.tokens)
        return sorted(text(t) for t, n in stored.items() if text(n) == name)

    def create(self, name: str, token: str | None = None, operator: bool | None = None) -> Token:
        """Idempotent for the same (name, token); never re-assigns a token to a new name.
        `operator` sets or clears the mark (None leaves it): after the token is the
        client's, so a refused request marks no one."""
        chosen = token or default_token(name)
        if not self._redis.hsetnx(self._keys.tokens, chosen, name) and self.name_of(chosen) != name:
            raise Conflict("token already belongs to another client")
        if operator is True:
            self._redis.sadd(self._keys.operators, chosen)
        elif operator is False:
            self._redis.srem(self._keys.operators, chosen)
        return Token(name, chosen, self.is_operator(chosen))
