"""/topics: publish (one event or an array), list, delete."""

from __future__ import annotations

from flask import Blueprint, Response, request

from app.errors import Forbidden, InvalidInput
from app.models import trace_context, validate
from app.services.operations import TOPIC
from app.web import publish as fast_publish
from app.web.auth import allow, principal
from app.web.body import read_body
from app.web.context import web_context
from app.web.publish import FAILED
from app.web.turns import Turns, collections_held, json_array

blueprint = Blueprint("topics", __name__)


@blueprint.post("/topics/<name>")
def publish(name: str) -> tuple[str, int]:
    """Most publishes never get here: app/web/publish.py answers them before Flask. This
    view takes the others (a chunked body, say) and raises what the fast path met, so
    that Flask's handlers answer every error."""
    failed = request.environ.pop(FAILED, None)
    if failed is not None:
        raise failed
    idempotency_key = request.headers.get("Idempotency-Key")
    trace = trace_context.parse(request.headers.get("traceparent"), _tracestate())
    fast_publish.publish(
        web_context(), name, request.authorization, idempotency_key, read_body,
        request.content_length, trace,
    )  # fmt: skip
    return "", 204


def _tracestate() -> str | None:
    """Every `tracestate` field as one list, as WSGI joins them for the fast path."""
    fields = request.headers.getlist("tracestate")
    return ",".join(fields) if fields else None


@blueprint.get("/topics")
@allow("client", "root")
def list_topics() -> Response:
    """Every topic, as Routemaster lists them; `?mine=true`: for a client, only those it
    publishes or subscribes to (what its console shows), for the root key every one. No
    one sees another client's token (app/models/topics.py)."""
    mine = request.args.get("mine", "false")
    if mine not in ("true", "false"):
        raise InvalidInput("mine must be true or false")
    who = principal()
    caller = None if who.kind == "root" else who.token
    owner = caller if mine == "true" else None
    turns = Turns()
    with collections_held():
        listed = []
        for topic in web_context().topics.all(owner, turns.take):
            entry = topic.describe(caller)
            if caller is not None and topic.publisher_token == caller:
                entry["publisher"] = who.login  # the token it asked with (its own client's)
            listed.append(entry)
            turns.take()
        return json_array([listed], turns)


@blueprint.delete("/topics/<name>")
@allow("client", "root")
def delete_topic(name: str) -> tuple[str, int]:
    topic = validate.topic_name(name, "topic name")
    who = principal()
    if topic == TOPIC and who.kind != "root":
        raise Forbidden(f"{TOPIC} is the bus's own topic: only the root key may delete it")
    web_context().topics.delete(topic, None if who.kind == "root" else who.token)
    return "", 204
