"""GET and PUT /topics/<name>/retention (app/models/retention.py): how long the topic's
delivered and dead-lettered payloads are kept. Anyone who may list topics reads it; its
publisher, or root, sets it (null: the bus's default again)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.models import validate
from app.models.retention import Retention
from app.web.auth import allow, caller
from app.web.body import json_body
from app.web.context import web_context

blueprint = Blueprint("retention", __name__)


def retention() -> Retention:
    ctx = web_context()
    return Retention(ctx.redis, ctx.keys, ctx.scripts, ctx.settings.payload_retention_s)


@blueprint.get("/topics/<name>/retention")
@allow("client", "root")
def get_retention(name: str) -> Response:
    return jsonify(retention().get(validate.topic_name(name, "topic name")))


@blueprint.put("/topics/<name>/retention")
@allow("client", "root")
def put_retention(name: str) -> Response:
    topic = validate.topic_name(name, "topic name")
    return jsonify(retention().set(topic, caller(), json_body()))
