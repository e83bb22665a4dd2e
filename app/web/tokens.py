"""/api_tokens: the root key manages the clients that may use the bus.

A name is one client's: posting a name in use is a 409, unless the request says `"add":
true`, which gives the client of that name another token (a rotation: add the next,
move the callers over, delete the old). Deleting a token of a client that has another
removes that token only; deleting its last removes the client and its subscription.
"""

from __future__ import annotations

import contextlib

from flask import Blueprint, Response, jsonify

from app.errors import Conflict, InvalidInput, NotFound
from app.models.fields import Rules
from app.models.tokens import TOKEN_REQUEST
from app.services.operations import TOPIC
from app.web.auth import allow
from app.web.body import json_object
from app.web.context import web_context
from app.web.turns import Turns, collections_held, json_array

blueprint = Blueprint("tokens", __name__)


@blueprint.get("/api_tokens")
@allow("root")
def list_tokens() -> Response | tuple[str, int]:
    """Beside 10,000 clients some 0.1 s of a web's CPU: encoded with turns
    (app/web/turns.py)."""
    turns = Turns()
    with collections_held():
        tokens = web_context().tokens.all()
        if not tokens:
            return "", 204
        turns.take()
        rows = [{"name": t.name, "token": t.token, "operator": t.operator} for t in tokens]
        return json_array([rows], turns)


@blueprint.post("/api_tokens")
@allow("root")
def create_token() -> tuple[Response, int]:
    body = json_object(allowed=set(TOKEN_REQUEST.fields), required=set(TOKEN_REQUEST.required))
    fields, rules = TOKEN_REQUEST.fields, Rules()
    name = fields["name"].check(body["name"], "name", rules)
    token = body.get("token")
    if token is not None:
        token = fields["token"].check(token, "token", rules)
        root = web_context().settings.root_key
        if token == root:
            raise InvalidInput("token must differ from the root key")
    operator = body.get("operator")
    if operator is not None:
        operator = fields["operator"].check(operator, "operator", rules)
    add = body.get("add")
    if add is not None:
        add = fields["add"].check(add, "add", rules)
    created = web_context().tokens.create(name, token, operator, bool(add))
    if operator is False:  # no longer told: its subscription to the bus's topic ends
        with contextlib.suppress(NotFound):
            web_context().subscribers.unsubscribe_topic(created.client, TOPIC)
    return jsonify(name=created.name, token=created.token, operator=created.operator), 201


@blueprint.delete("/api_tokens/<token>")
@allow("root")
def delete_token(token: str) -> tuple[str, int]:
    """The token's client goes with its last token; while it has another, only this one."""
    ctx = web_context()
    key = ctx.tokens.key_of(token)
    if key is not None:  # None: a client's own token, deleted already while it kept another
        ctx.subscribers.delete(key, forget_token=True, login=token)
    return "", 204


@blueprint.delete("/api_tokens/by_name/<name>")
@allow("root")
def delete_token_named(name: str) -> tuple[str, int]:
    """Deletion without the token in a URL (URLs end up in proxies' and browsers' logs):
    the one client of that name with every token it has, as the dead-letter routes find
    a subscriber by name."""
    ctx = web_context()
    found = ctx.tokens.tokens_named(name)
    if not found:
        raise NotFound(f"no client named {name[:80]}")
    if len(found) > 1:
        raise Conflict(f"{len(found)} clients are named {name[:80]}; delete each by its token")
    ctx.subscribers.delete(found[0], forget_token=True)
    return "", 204
