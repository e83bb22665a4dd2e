"""GET /destination-types: the brokers a subscription's `destination` may name, each
with its fields (required, write-only, an example), so a console or a client can render
a form without knowing busbar's rules (docs/destinations.md). Any client or root may
ask; Redis is not asked."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.models.destination_types import described_types
from app.web.auth import allow

blueprint = Blueprint("destinations", __name__)


@blueprint.get("/destination-types")
@allow("client", "root")
def destination_types() -> Response:
    return jsonify(described_types())
