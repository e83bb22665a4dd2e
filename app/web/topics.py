"""/topics: publish (one event or an array), list, delete."""

from __future__ import annotations

import dataclasses

from flask import Blueprint, Response, jsonify, request

from app.errors import InvalidInput
from app.models import event_ids, validate
from app.models.event import parse_events
from app.services.ingest import now_ms
from app.web.auth import allow, claimed_client, principal, require_known
from app.web.body import json_body
from app.web.context import services

blueprint = Blueprint("topics", __name__)


@blueprint.post("/topics/<name>")
def publish(name: str) -> tuple[str, int]:
    """The hot path: one Redis round trip on a single Redis, the token checked inside the
    topic step. `Idempotency-Key: <id>`: a repeat of the request within
    BUSBAR_PUBLISH_DEDUPE_S queues nothing twice (app/services/ingest.py)."""
    token = claimed_client()
    ctx = services()
    settings = ctx.settings
    now = now_ms()
    try:
        topic = validate.topic_name(name, "topic name")
        publish_id = validate.publish_id(request.headers.get("Idempotency-Key"))
        events = parse_events(
            json_body(),
            now_ms=now,
            allow_http=settings.allow_http,
            max_data=settings.max_event_data,
        )
    except InvalidInput:
        require_known(token)
        raise
    if not events:  # `[]`: no script runs, so the token is checked here
        require_known(token)
    if publish_id is not None:  # its events' ids for `event_ids` subscriptions
        events = [
            dataclasses.replace(e, event_id=event_ids.for_publish(topic, publish_id, i))
            for i, e in enumerate(events)
        ]
    ctx.ingest.publish(topic, token, events, now, publish_id)
    return "", 204


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
    return jsonify([t.describe(caller) for t in services().topics.all(owner)])


@blueprint.delete("/topics/<name>")
@allow("client", "root")
def delete_topic(name: str) -> tuple[str, int]:
    topic = validate.topic_name(name, "topic name")
    who = principal()
    services().topics.delete(topic, None if who.kind == "root" else who.token)
    return "", 204
