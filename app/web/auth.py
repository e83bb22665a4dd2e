"""HTTP Basic authentication as Routemaster does it: the token is the username.

The root key is compared in constant time; client tokens are looked up in Redis. A
request without known credentials gets 401 with a Basic challenge, so that curl and
browsers know what to send; known credentials on the wrong kind of endpoint get 403.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, Literal, cast

from flask import g, request
from werkzeug.datastructures import Authorization

from app.errors import Forbidden, Unauthorized
from app.models.tokens import TOKEN_PATTERN
from app.web.context import WebContext, web_context

Kind = Literal["root", "client"]


@dataclass(frozen=True)
class Principal:
    """Who a request is from. `token` is the client's key, which everything it owns is
    stored under; `login` the token it presented (another of the client's, after a
    token was added to it: app/models/tokens.py)."""

    kind: Kind
    token: str
    name: str
    login: str = ""


def basic_username(auth: Authorization | None) -> str:
    """The token from parsed Basic credentials (Flask's `request.authorization`, or the
    publish fast path's own parse of the same header)."""
    if auth is None or auth.type != "basic" or not auth.username:
        raise Unauthorized("HTTP Basic credentials required: the API token is the username")
    return auth.username


def _is_root(ctx: WebContext, token: str) -> bool:
    root = ctx.settings.root_key
    return root is not None and hmac.compare_digest(token.encode(), root.encode())


def authenticate() -> Principal:
    ctx = web_context()
    token = basic_username(request.authorization)
    if _is_root(ctx, token):
        return Principal(kind="root", token=token, name="root", login=token)
    if TOKEN_PATTERN.fullmatch(token):
        found = ctx.tokens.login(token)
        if found is not None:
            return Principal(kind="client", token=found.client, name=found.name, login=token)
    raise Unauthorized("unknown API token")


def claimed_client(ctx: WebContext, auth: Authorization | None) -> str:
    """A client token, checked later by the write itself (publish.lua, which also finds
    the client a token added to one acts as): the hot path saves a round trip, and root
    or malformed credentials still fail before any work."""
    token = basic_username(auth)
    if _is_root(ctx, token):
        raise Forbidden("this endpoint needs a client token")
    if not TOKEN_PATTERN.fullmatch(token):
        raise Unauthorized("unknown API token")
    return token


def require_known(ctx: WebContext, token: str) -> None:
    """For a claimed client whose request fails before its write: 401 still beats 400."""
    if ctx.tokens.login(token) is None:
        raise Unauthorized("unknown API token")


def allow(*kinds: Kind) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Let through only principals of these kinds; the principal lands in `g.principal`."""
    wanted = " or ".join("the root key" if k == "root" else "a client token" for k in kinds)

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(view)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            principal = authenticate()
            if principal.kind not in kinds:
                raise Forbidden(f"this endpoint needs {wanted}")
            g.principal = principal
            return view(*args, **kwargs)

        return guarded

    return decorate


def principal() -> Principal:
    # flask.g is untyped; allow() stores the request's Principal there before the view
    return cast(Principal, g.principal)


def caller() -> str | None:
    """The client's key, or None for root: what a model that lets root do anything and
    a client only its own is given (schemas, erasures, retention)."""
    who = principal()
    return None if who.kind == "root" else who.token
