"""/subscription(s) and /subscriber(s): Routemaster's paths and their aliases."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

from flask import Blueprint, Response, request

from app.clock import now_ms
from app.errors import Forbidden
from app.models import subscriber_pages as pages
from app.models import validate
from app.models.callback_policy import Policy
from app.models.client_cert import ClientCert
from app.models.filters import filter_bounds
from app.models.subscriber_detail import detailed
from app.models.subscription import parse_subscription
from app.services.operations import TOPIC
from app.services.sealed_headers import to_store
from app.web.auth import allow, principal
from app.web.body import json_body
from app.web.context import web_context
from app.web.turns import Turns, collections_held, json_array

blueprint = Blueprint("subscriptions", __name__)
# subscribers read and described at once: a pipelined read, then a turn for the others
# (app/web/turns.py): some 5 ms of a web's CPU a read (250 at once left publishes a p99
# of 19 ms beside a listing a second, 100 at once 8 ms)
DESCRIBED_AT_ONCE = 100


@blueprint.post("/subscription")
@blueprint.post("/subscriber")
@allow("client")
def subscribe() -> tuple[str, int]:
    ctx = web_context()
    sub = parse_subscription(
        json_body(),
        allow_http=ctx.settings.allow_http,
        policy=Policy.of(ctx.settings),
        filters=filter_bounds(ctx.settings),
        transforms=(ctx.settings.transform_max_bytes, ctx.settings.max_event_data),
    )
    token = principal().token
    if TOPIC in sub.topics and not ctx.tokens.is_operator(token):
        raise Forbidden(
            f"only an operator client may subscribe to {TOPIC} (root marks one: "
            'POST /api_tokens with {"name": ..., "token": ..., "operator": true})'
        )
    now = now_ms()
    headers = to_store(sub.headers, ctx.subscribers.headers(token), ctx.sealer, token, now)
    cert = sub.client_cert
    sealed = cert.stored(ctx.sealer, token, now) if isinstance(cert, ClientCert) else cert or ""
    given = sub.auth
    auth = (
        "" if given is None else given.stored(ctx.subscribers.auth(token), ctx.sealer, token, now)
    )
    destination = sub.destination
    broker = "" if destination is None else destination.stored(ctx.sealer, token, now)
    ctx.subscribers.subscribe(token, sub, now, headers, sealed, auth, broker)
    return "", 204


@blueprint.get("/subscriptions")
@blueprint.get("/subscribers")
@allow("client", "root")
def list_subscriptions() -> Response:
    """Root sees every subscriber; a client sees only its own (its uuid is a secret),
    its `subscriber` the token it asked with: Routemaster's clients find their entry by
    their token, also when it is one added to the client (root sees the client's key).
    By the clients' names; `?limit` and `?after` ask for a page, its next one in a
    `Link` header (app/models/subscriber_pages.py)."""
    ctx = web_context()
    who = principal()
    asked = pages.parse_query(request.args.to_dict())
    turns = Turns()
    with collections_held():
        tokens = ctx.subscribers.tokens() if who.kind == "root" else [who.token]
        turns.take()
        names = ctx.subscribers.names(tokens)
        turns.take()
        chosen = pages.page(tokens, names, asked or pages.PageQuery(len(tokens), None))
        turns.take()

        def entries() -> Iterator[list[dict[str, Any]]]:
            for start in range(0, len(chosen.tokens), DESCRIBED_AT_ONCE):
                part = chosen.tokens[start : start + DESCRIBED_AT_ONCE]
                for info in ctx.subscribers.describe(part, names, turn=turns.take):
                    (entry,) = detailed([info])  # a turn after each: see describe's
                    if who.kind == "client":
                        entry = {**entry, "subscriber": who.login}
                    yield [entry]

        response = json_array(entries(), turns)
    if asked is not None and chosen.next is not None:
        link = f"{request.path}?{urlencode({'limit': asked.limit, 'after': chosen.next})}"
        response.headers["Link"] = f'<{link}>; rel="next"'
    return response


@blueprint.delete("/subscriber")
@allow("client")
def unsubscribe() -> tuple[str, int]:
    web_context().subscribers.delete(principal().token)
    return "", 204


@blueprint.delete("/subscriber/topics/<name>")
@allow("client")
def unsubscribe_topic(name: str) -> tuple[str, int]:
    topic = validate.topic_name(name, "topic name")
    web_context().subscribers.unsubscribe_topic(principal().token, topic)
    return "", 204
