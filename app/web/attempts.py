"""The attempt log over HTTP: what happened to each delivery attempt, newest first.

A client reads its own under /subscriber/attempts; the root key reads any subscriber's
under /subscribers/<client name>/attempts, by name as for dead letters. Query: `outcome`
(comma-separated, app/models/attempts.py's OUTCOMES), `since` and `until` (ISO 8601 or
epoch ms; half-open), `batch`, `limit` (1-1,000, default 100) and `before` (a page's
`next`). Anything else malformed is a 400 naming the parameter. A batch an attempt
names is one click away under /subscriber/batches/<id> (root: /subscribers/<name>/
batches/<id>) while it is queued.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from app.clock import instant
from app.errors import InvalidInput
from app.models.attempts import AttemptLog, Query, queued_batch
from app.models.validate import digits
from app.web.auth import allow, principal
from app.web.context import web_context
from app.web.deadletters import subscriber_named

blueprint = Blueprint("attempts", __name__)
PARAMETERS = ("outcome", "since", "until", "batch", "limit", "before")


def query() -> Query:
    args = request.args
    unknown = sorted(set(args) - set(PARAMETERS))
    if unknown:
        raise InvalidInput(f"unknown parameter {unknown[0]!r}: use {', '.join(PARAMETERS)}")
    outcomes = frozenset(o.strip() for v in args.getlist("outcome") for o in v.split(",") if o)
    limit = args.get("limit", "100")
    if not digits(limit):
        raise InvalidInput("limit must be an integer")
    since, until = args.get("since"), args.get("until")
    return Query(
        outcomes=outcomes,
        since_ms=None if since is None else _time(since, "since"),
        until_ms=None if until is None else _time(until, "until"),
        batch=args.get("batch"),
        limit=int(limit),
        before=args.get("before"),
    )


def _time(text: str, name: str) -> int:
    try:
        return instant(text)
    except InvalidInput as exc:
        raise InvalidInput(f"{name}: {exc.message}") from None


def page(token: str) -> Response:
    ctx = web_context()
    return jsonify(AttemptLog(ctx.redis, ctx.keys).page(token, query()))


def batch(token: str, batch_id: str) -> Response:
    ctx = web_context()
    return jsonify(queued_batch(ctx.redis, ctx.keys, token, batch_id))


@blueprint.get("/subscriber/batches/<batch_id>")
@allow("client")
def batch_own(batch_id: str) -> Response:
    return batch(principal().token, batch_id)


@blueprint.get("/subscribers/<path:client>/batches/<batch_id>")
@allow("root")
def batch_named(client: str, batch_id: str) -> Response:
    return batch(subscriber_named(client), batch_id)


@blueprint.get("/subscriber/attempts")
@allow("client")
def list_own() -> Response:
    return page(principal().token)


@blueprint.get("/subscribers/<path:client>/attempts")
@allow("root")
def list_named(client: str) -> Response:
    return page(subscriber_named(client))
