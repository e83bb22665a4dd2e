"""POST /erasures, GET /erasures and GET /erasures/<id> (app/models/erasures.py).

Root erases on any topic and sees every erasure; a client erases on the topics it
publishes and sees its own. The POST answers 202 at once with the receipt as it stands
(state `running`): the worker's aux job `erase` carries it out, and the receipt fills
as it goes.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.clock import now_ms
from app.models.erasures import Erasures
from app.web.auth import allow, caller, principal
from app.web.body import json_body
from app.web.context import web_context

blueprint = Blueprint("erasures", __name__)


def erasures() -> Erasures:
    ctx = web_context()
    return Erasures(ctx.redis, ctx.keys, ctx.scripts)


@blueprint.post("/erasures")
@allow("root", "client")
def ask() -> tuple[Response, int, dict[str, str]]:
    body = json_body()
    receipt = erasures().ask(body, caller(), principal().name, now_ms())
    return jsonify(receipt), 202, {"Location": f"/erasures/{receipt['id']}"}


@blueprint.get("/erasures")
@allow("root", "client")
def listing() -> Response:
    return jsonify(erasures().listing(caller()))


@blueprint.get("/erasures/<erasure_id>")
@allow("root", "client")
def receipt(erasure_id: str) -> Response:
    return jsonify(erasures().receipt(erasure_id, caller()))
