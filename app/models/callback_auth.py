"""How a subscription's callback authenticates the bus beyond busbar's signature: the
`auth` field of POST /subscription. `basic` (the default) is Routemaster's Basic user, the
subscription's uuid; `jwt` replaces it with `Authorization: Bearer <JWT>`, a token the
bus signs per push (app/services/push_tokens.py). Both cannot share one Authorization
header, so a Routemaster receiver keeps `basic` (docs/callback-auth.md); `oauth2` sends
an access token the bus gets with OAuth2 client credentials (app/models/oauth2.py).
Absent, a changed subscription keeps what it had; `{"type": "basic"}` goes back to the
uuid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.errors import InvalidInput
from app.models.callback_headers import VALUE
from app.models.fields import Doc, Field, Rules
from app.models.oauth2 import OAuth2, described_oauth2, parse_oauth2, shape_oauth2
from app.models.sealed import Sealer

AUTH_TYPES = ("basic", "jwt", "oauth2")
MAX_AUDIENCE = 512


@dataclass(frozen=True)
class Auth:
    """How the callback authenticates the bus beyond the signature: `basic` (the uuid as
    Basic user, Routemaster's), `jwt` (a signed token per push,
    app/services/push_tokens.py) or `oauth2` (client credentials)."""

    type: str
    audience: str | None = None  # the token's `aud`; None: the callback URL
    oauth2: OAuth2 | None = None

    def stored(
        self, current: bytes | None = None, sealer: Sealer | None = None, token: str = "",
        now: int = 0,
    ) -> str:  # fmt: skip
        """subscribe.lua's `auth` argument: 'basic' removes the field. For oauth2, its
        secret sealed by `sealer` for `token`; `current`: the stored field, whose secret a
        change without one keeps."""
        if self.type == "basic":
            return "basic"
        if self.oauth2 is not None:
            if sealer is None:
                raise ValueError("an oauth2 secret is sealed before it is stored")
            return self.oauth2.stored(stored_auth(current), sealer, token, now)
        return json.dumps({"type": self.type, "audience": self.audience}, separators=(",", ":"))


def stored_auth(text: bytes | str | None) -> dict[str, Any] | None:
    return json.loads(text) if text else None


def described_auth(text: bytes | str | None) -> dict[str, Any]:
    """What a listing shows: an OAuth2 secret only as set, and since when."""
    found = stored_auth(text) or {"type": "basic"}
    return described_oauth2(found) if found["type"] == "oauth2" else found


@dataclass(frozen=True)
class AuthField(Field):
    """The `auth` field of POST /subscription."""

    nullable: bool = False  # a null is a 400 naming the field (app/models/subscription.py)
    description: str = (
        '{"type": "jwt", "audience"?: ...}: each push carries Authorization: Bearer <JWT> '
        "signed by the bus (verify against GET /.well-known/jwks.json; aud: the audience, "
        "else the callback URL) instead of the Basic uuid; "
        '{"type": "oauth2", "token_url", "client_id", "client_secret" or "private_key" '
        '(PEM, RFC 7523), "scope"?, "audience"?}: an access token from the token endpoint '
        "(client credentials), cached for the whole bus, the secret or key write-only; "
        '{"type": "basic"}: the uuid (the default). Absent: a changed subscription keeps '
        "its own"
    )

    def check(self, value: Any, where: str, rules: Rules) -> Auth:
        if not isinstance(value, dict):
            raise InvalidInput(f"{where} must be a JSON object with a `type`")
        kind = value.get("type")
        if kind not in AUTH_TYPES:
            raise InvalidInput(f"{where}.type must be one of {', '.join(AUTH_TYPES)}")
        if kind == "oauth2":
            return Auth(kind, oauth2=parse_oauth2(value, where, rules))
        unknown = set(value) - {"type", "audience"}
        if unknown:
            raise InvalidInput(f"{where}: unknown field {sorted(unknown)[0]!r}")
        audience = value.get("audience")
        if audience is not None:
            if kind != "jwt":
                raise InvalidInput(f"{where}.audience is for the jwt type only")
            if not isinstance(audience, str) or not 1 <= len(audience) <= MAX_AUDIENCE:
                raise InvalidInput(f"{where}.audience must be 1 to {MAX_AUDIENCE} characters")
            if not VALUE.fullmatch(audience):
                raise InvalidInput(f"{where}.audience must be printable ASCII")
        return Auth(kind, audience)

    def shape(self, rules: Rules) -> Doc:
        def kind(name: str, **more: Doc) -> Doc:
            return {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"type": "string", "enum": [name]}, **more},
                "additionalProperties": False,
            }

        audience = {"type": "string", "minLength": 1, "maxLength": MAX_AUDIENCE,
                    "pattern": f"^{VALUE.pattern}$"}  # fmt: skip
        return {"oneOf": [kind("basic"), kind("jwt", audience=audience), shape_oauth2(rules)]}
