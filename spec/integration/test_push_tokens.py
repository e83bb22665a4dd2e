"""A JWT per push, as a receiver checks it: `busbar web` and `busbar worker` as
processes, a real subscriber, and PyJWT fetching the bus's GET /.well-known/jwks.json.
A subscription with `auth: {"type": "jwt"}` gets `Authorization: Bearer <JWT>` instead
of the Basic uuid, issued by BUSBAR_PUBLIC_URL for its callback URL (or its audience)
and naming the subscriber; after root rotates the key, tokens signed before still
verify, and a worker started since signs with the new key; `{"type": "basic"}` goes
back to the uuid.

On one Redis (`layout_free`): a JWT per push is a cell of the composition matrix
(test_matrix.py), which delivers on a Redis Cluster too; what this adds is the token
as a receiver checks it."""

from __future__ import annotations

import signal
from pathlib import Path

import jwt
import pytest

from spec.integration.bus import ROOT_KEY, bus, events
from spec.integration.subscriber import Received, serving

pytestmark = pytest.mark.layout_free

ISSUER = "https://bus.example.test"


def bearer(request: Received) -> str:
    kind, _, token = request.headers.get("Authorization", "").partition(" ")
    assert kind == "Bearer", request.headers.get("Authorization")
    return token


def verified(jwks_url: str, token: str, audience: str) -> dict:
    key = jwt.PyJWKClient(jwks_url, cache_keys=False).get_signing_key_from_jwt(token)
    return jwt.decode(token, key.key, algorithms=["ES256"], audience=audience, issuer=ISSUER)


def test_each_push_carries_a_token_the_receiver_verifies_across_a_key_rotation(
    redis_url: str, tmp_path: Path
):  # fmt: skip
    with serving() as billing, serving() as audit, \
            bus(redis_url, tmp_path, BUSBAR_PUBLIC_URL=ISSUER) as the_bus:  # fmt: skip
        jwks_url = f"{the_bus.base}/.well-known/jwks.json"
        the_bus.client("pub"), the_bus.client("billing"), the_bus.client("audit")
        the_bus.subscribe("billing", billing.url, ["orders"], max=1, timeout=0,
                          auth={"type": "jwt"})  # fmt: skip
        the_bus.subscribe("audit", audit.url, ["orders"], max=1, timeout=0,
                          auth={"type": "jwt", "audience": "audit-api"})  # fmt: skip
        assert the_bus.subscription("billing")["auth"] == {"type": "jwt", "audience": None}
        the_bus.publish("pub", "orders", events(1))
        billing.wait_for(1), audit.wait_for(1)

        first = bearer(billing.received[0])
        claims = verified(jwks_url, first, billing.url)
        assert claims["sub"] == "billing" and claims["exp"] - claims["iat"] == 300
        assert verified(jwks_url, bearer(audit.received[0]), "audit-api")["sub"] == "audit"
        with pytest.raises(jwt.InvalidAudienceError):
            verified(jwks_url, first, "https://someone-else.test/")
        signed_by = jwt.get_unverified_header(first)["kid"]

        rotated = the_bus.call("POST", "/push-keys/rotate", ROOT_KEY)
        assert rotated.status_code == 200 and rotated.json()["former"] == signed_by
        new_kid = rotated.json()["kid"]
        published = [k["kid"] for k in the_bus.http.get(jwks_url, timeout=10).json()["keys"]]
        assert published == [new_kid, signed_by]
        assert verified(jwks_url, first, billing.url)["sub"] == "billing"  # still verifies

        for worker in the_bus.workers:  # one started after the rotation signs with the new key
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(60) == 0
        the_bus.start_worker()
        the_bus.publish("pub", "orders", events(1, start=1))
        billing.wait_for(2)
        later = bearer(billing.received[-1])
        assert jwt.get_unverified_header(later)["kid"] == new_kid
        assert verified(jwks_url, later, billing.url)["sub"] == "billing"

        the_bus.subscribe("billing", billing.url, ["orders"], max=1, timeout=0,
                          auth={"type": "basic"})  # fmt: skip
        the_bus.publish("pub", "orders", events(1, start=2))
        billing.wait_for(3)
        assert billing.received[-1].user == the_bus.subscription("billing")["uuid"]
        assert the_bus.subscription("billing")["auth"] == {"type": "basic"}
