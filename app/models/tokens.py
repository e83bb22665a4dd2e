"""API tokens: which clients exist, what they are called, and which tokens act as whom.

A client is keyed by the token it was created with: that key is its subscriber key,
its shard (app/models/keys.py shard_of), the publisher of its topics and what its
operator mark names, and it never changes. A client may have more tokens (a rotation
adds the next before the last goes, `"add": true`): each acts as the client's key, so
both are one client (one subscription, one row, one `subscriber` in the lake). A name
is one client's: a second client of a name is a 409, decided in the script that writes
the token (api_token_create.lua), so two creations of one name cannot both succeed.
Names are free text for people; tokens follow `^[a-z0-9:_-]{1,64}$`.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

import redis

from app.errors import InvalidInput
from app.lua import Scripts
from app.models import token_calls as calls
from app.models.fields import Checked, Shape
from app.models.keys import Keys
from app.redis_client import text

TOKEN_PATTERN = re.compile(r"[a-z0-9:_-]{1,64}")
_SLUG_UNSAFE = re.compile(r"[^a-z0-9:_-]+")
MAX_NAME = 64


@dataclass(frozen=True)
class Token:
    name: str
    token: str
    operator: bool = False  # may subscribe to busbar_operations (app/services/operations.py)
    client: str = ""  # the client's key: this token, or the one the client was created with


@dataclass(frozen=True)
class Login:
    """Who a token authenticates as: its client's key and name."""

    client: str
    name: str


def fingerprint(token: str) -> str:
    """How a command names a client without printing its token (`busbar clients`): a
    digest, which tells two clients of one name apart and gives no token away."""
    return "fp_" + hashlib.sha256(token.encode()).hexdigest()[:12]


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


def _boolean(field: str) -> Callable[[object], bool]:
    def check(value: object) -> bool:
        if not isinstance(value, bool):
            raise InvalidInput(f"{field} must be true or false")
        return value

    return check


validate_operator = _boolean("operator")
validate_add = _boolean("add")

TOKEN_REQUEST = Shape(
    {
        "name": Checked(
            validate_name,
            {"type": "string", "minLength": 1, "maxLength": MAX_NAME,
             "pattern": r"^[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f][^\x00-\x1f\x7f]*$"},
            description="free text for people, one client's: a name in use is a 409 "
            "unless `add` is true",
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
        "add": Checked(
            validate_add,
            {"type": "boolean"},
            description="true: add the token to the existing client of that name (a "
            "rotation's next token), which both tokens then act as; 404 when no client "
            "has the name",
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
    def __init__(self, client: redis.Redis, keys: Keys, scripts: Scripts | None = None) -> None:
        self._redis = client
        self._keys = keys
        self._scripts = scripts

    def all(self) -> list[Token]:
        """Every token that authenticates: each client's own (unless deleted while it
        kept another) and the tokens added to clients."""
        pipe = self._redis.pipeline(transaction=False)
        pipe.hgetall(self._keys.tokens)
        pipe.hgetall(self._keys.aliases)
        pipe.smembers(self._keys.operators)
        stored, aliases, operators = pipe.execute()
        tokens = [
            Token(text(name), text(key), key in operators, text(key))
            for key, name in stored.items()
            if aliases.get(key) != b""
        ]
        tokens += [
            Token(text(stored[key]), text(token), key in operators, text(key))
            for token, key in aliases.items()
            if key in stored
        ]
        return sorted(tokens, key=lambda t: (t.name, t.token))

    def is_operator(self, key: str) -> bool:
        return bool(self._redis.sismember(self._keys.operators, key))

    def name_of(self, key: str) -> str | None:
        """The name of the client of that key."""
        name = self._redis.hget(self._keys.tokens, key)
        return None if name is None else text(name)

    def login(self, token: str) -> Login | None:
        """Who the token authenticates as, or None (unknown, or deleted): one round trip
        for a client's own token, two for one added to it."""
        pipe = self._redis.pipeline(transaction=False)
        pipe.hget(self._keys.aliases, token)
        pipe.hget(self._keys.tokens, token)
        key, name = pipe.execute()
        if key == b"":
            return None
        if key is not None:
            name = self._redis.hget(self._keys.tokens, key)
            return None if name is None else Login(text(key), text(name))
        return None if name is None else Login(token, text(name))

    def key_of(self, token: str) -> str | None:
        """The key of the client a token acts as, for deleting it: the token itself when it
        is a client's own, or no client's (so a delete a crash cut short can finish); None
        for a client key whose own token was deleted already."""
        key = self._redis.hget(self._keys.aliases, token)
        if key == b"":
            return None
        return token if key is None else text(key)

    def tokens_named(self, name: str) -> list[str]:
        """The keys of the clients of that name, sorted: one, or since names were made
        unique, more only for clients made before (`busbar clients shared`)."""
        stored = self._redis.hgetall(self._keys.tokens)
        return sorted(text(t) for t, n in stored.items() if text(n) == name)

    def create(
        self, name: str, token: str | None = None, operator: bool | None = None, add: bool = False
    ) -> Token:
        """A new client, or with `add` a new token of the client of that name; idempotent
        for a token posted again with its client's name; never re-assigns a token.
        `operator` sets or clears the client's mark (None leaves it), in the same step."""
        chosen = token or default_token(name)
        scripts = self._scripts or Scripts(self._redis)
        created = scripts.run(calls.create(self._keys, name, chosen, add, operator))
        return Token(name, chosen, created.operator, created.client)
