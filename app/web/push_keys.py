"""The keys of the JWT per push: GET /.well-known/jwks.json, public as a JWKS is (only
public keys; a receiver fetches it without credentials), and root's rotation.
app/models/push_keys.py says how they are kept."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.clock import now_ms
from app.models.push_keys import PushKeys
from app.web.auth import allow
from app.web.context import web_context
from app.web.secrets import no_body

blueprint = Blueprint("push_keys", __name__)
CACHED_S = 300  # a verifier may keep the set this long: a new key is current before use


def store() -> PushKeys:
    ctx = web_context()
    return PushKeys(ctx.redis, ctx.keys, ctx.scripts, ctx.sealer)


@blueprint.get("/.well-known/jwks.json")
def jwks() -> Response:
    response = jsonify(store().jwks(now_ms()))
    response.headers["Cache-Control"] = f"public, max-age={CACHED_S}"
    return response


@blueprint.post("/push-keys/rotate")
@allow("root")
def rotate() -> Response:
    """A new key signs from now on; the former one stays published BUSBAR_SECRET_GRACE_S."""
    no_body()
    grace = web_context().settings.secret_grace_s
    kid, former = store().rotate(now_ms(), grace)
    return jsonify(kid=kid, former=former, former_until=now_ms() + grace * 1000)
