"""The OpenAPI of signed deliveries: reading and rotating signing secrets, and the
push JWT's keys (GET /.well-known/jwks.json, their rotation), and the test call to a
callback (POST /subscription/test).

No example carries a secret: the schema gives the shape (`whsec_` + base64) only.
"""

from __future__ import annotations

from app.models.fields import Doc
from app.web.openapi.parts import ANYONE, CLIENT, ROOT, obj, operation, ref


def secrets_paths() -> dict[str, Doc]:
    secret = {200: ref("Secret")}
    trial = (
        "one request to the callback as a delivery of [] (Busbar-Test: 1), authenticated "
        "as deliveries are; what came back"
    )
    trial_own = operation(trial, CLIENT, {200: ref("Trial")}, (400, 404, 413))
    trial_named = operation(trial + ", by client name", ROOT, {200: ref("Trial")},
                            (400, 404, 409, 413), name="client")  # fmt: skip
    by_name = operation(
        "rotate a subscriber's signing secret, by client name (root never reads it)",
        ROOT, {204: None}, (400, 404, 409, 413), name="client",
    )  # fmt: skip
    return {
        "/subscriber/secret": {
            "get": operation("the subscriber's signing secret", CLIENT, secret, (404,))
        },
        "/subscriber/secret/rotate": {
            "post": operation(
                "a new signing secret; the old one signs too for BUSBAR_SECRET_GRACE_S",
                CLIENT,
                secret,
                (400, 404, 413),
            )
        },
        "/subscribers/{client}/secret/rotate": {"post": by_name},
        "/subscriptions/{client}/secret/rotate": {"post": by_name},
        "/.well-known/jwks.json": {
            "get": operation(
                "the public keys that verify each push's JWT (auth type jwt), current first",
                ANYONE,
                {200: ref("Jwks")},
            )
        },
        "/subscription/test": {"post": trial_own},
        "/subscriber/test": {"post": trial_own},
        "/subscribers/{client}/test": {"post": trial_named},
        "/push-keys/rotate": {
            "post": operation(
                "a new key signs push JWTs; the former stays published BUSBAR_SECRET_GRACE_S",
                ROOT,
                {200: ref("PushKeyRotated")},
                (400, 413),
            )
        },
    }


def secrets_schemas() -> dict[str, Doc]:
    return {
        "Secret": obj(
            {
                "secret": {"type": "string", "pattern": "^whsec_[A-Za-z0-9+/=]+$"},
                "previous_until": {"type": "integer", "description": "ms; null: none"},
            },
            nullable=("previous_until",),
        ),
        "Jwks": obj(
            {
                "keys": {
                    "type": "array",
                    "items": obj(
                        {
                            "kty": {"type": "string", "enum": ["EC"]},
                            "crv": {"type": "string"},
                            "x": {"type": "string"},
                            "y": {"type": "string"},
                            "kid": {"type": "string"},
                            "alg": {"type": "string", "enum": ["ES256"]},
                            "use": {"type": "string"},
                        }
                    ),
                }
            }
        ),
        "Trial": obj(
            {
                "status": {"type": "integer"},
                "reason": {"type": "string"},
                "body": {"type": "string", "maxLength": 1024},
                "took_ms": {"type": "integer"},
            },
            nullable=("status", "reason"),
        ),
        "PushKeyRotated": obj(
            {
                "kid": {"type": "string"},
                "former": {"type": "string"},
                "former_until": {"type": "integer"},
            }
        ),
    }
