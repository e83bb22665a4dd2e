"""OAuth2 client credentials for a callback (`auth: {"type": "oauth2", ...}`): the bus
gets an access token from the subscriber's token endpoint (RFC 6749 section 4.4) and
sends it as `Authorization: Bearer <token>` in place of the Basic uuid.

The client authenticates to the token endpoint with `client_secret` (HTTP Basic,
RFC 6749 section 2.3.1, the method every server must take) or with `private_key`, an
RFC 7523 JWT assertion it signs (`private_key_jwt`: RS256 for an RSA key, ES256 for a
P-256 one). The secret or key is write-only: sealed before Redis holds it
(app/models/sealed.py), never listed; a listing says which is set and since when. A
changed subscription that gives `oauth2` without either keeps the stored one.

The token URL is held to the callbacks' rules (https, the address policy); the fetch
is app/delivery/token_fetch.py, the bus-wide cache app/delivery/token_source.py.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

from app.errors import InvalidInput
from app.models.callback_headers import VALUE
from app.models.callback_url import Callback
from app.models.fields import Doc, Rules
from app.models.sealed import Sealer, Unsealable, resealed_in

SECRETS = ("client_secret", "private_key")
MAX_TEXT = 512  # characters of client_id, scope, audience, client_secret
MAX_KEY = 16_384  # characters of a private key's PEM
MIN_RSA_BITS = 2048
FIELDS = ("type", "token_url", "client_id", "scope", "audience", *SECRETS)


@dataclass(frozen=True)
class OAuth2:
    token_url: str
    client_id: str
    scope: str | None = None
    audience: str | None = None  # sent as `audience`, as Auth0 and others ask
    secret_kind: str | None = None  # one of SECRETS; None: keep the stored one
    secret: str | None = None

    def stored(self, current: dict[str, Any] | None, sealer: Sealer, token: str, now: int) -> str:
        """The `auth` field's text, the secret sealed; without one given, the stored
        one is kept (400 when there is none). The same secret given again keeps its seal
        and set_at, so a client that posts its unchanged subscription at every start
        (as Routemaster's do) leaves the field as it was, and the cached token with it:
        an identity provider may bill or limit every token it issues."""
        found: dict[str, Any] = {"type": "oauth2", "token_url": self.token_url,
                                 "client_id": self.client_id, "scope": self.scope,
                                 "audience": self.audience}  # fmt: skip
        if self.secret is None:
            if not current or current.get("type") != "oauth2" or "secret" not in current:
                raise InvalidInput(
                    "auth: client_secret or private_key is required (no secret is stored to keep)"
                )
            found.update({k: current[k] for k in ("kind", "secret", "set_at")})
        elif current is not None and self._same_secret(current, sealer, token):
            found.update({k: current[k] for k in ("kind", "secret", "set_at")})
        else:
            found.update(kind=self.secret_kind, secret=sealer.seal(self.secret, where(token)),
                         set_at=now)  # fmt: skip
        return json.dumps(found, separators=(",", ":"))

    def _same_secret(self, current: dict[str, Any], sealer: Sealer, token: str) -> bool:
        """Whether `current` holds this very secret, of the same kind (one that does not
        open is not)."""
        if current.get("kind") != self.secret_kind or "secret" not in current:
            return False
        try:
            stored = sealer.open(current["secret"], where(token))
        except Unsealable:
            return False
        return hmac.compare_digest(stored.encode(), (self.secret or "").encode())


def where(token: str) -> str:
    """The secret's place, the associated data of its seal."""
    return f"subscriber {token} oauth2 secret"


def opened_secret(sealer: Sealer, config: dict[str, Any], token: str) -> str:
    """The stored client secret or private key, opened for a token request (a delivery's
    or the test call's); Unsealable names the field, never the token."""
    try:
        return sealer.open(config["secret"], where(token))
    except Unsealable as exc:
        raise Unsealable(f"OAuth2 {config.get('kind', 'secret')}: {exc.message}") from None


def token_where(token: str) -> str:
    """A cached access token's place (app/delivery/token_source.py)."""
    return f"subscriber {token} oauth2 token"


def fingerprint(raw: bytes) -> str:
    """Which stored configuration a cached token was fetched under: a change of any part
    (URL, client, scope, audience, secret) makes the cached token stale."""
    return hashlib.sha256(raw).hexdigest()[:32]


def described_oauth2(found: dict[str, Any]) -> dict[str, Any]:
    """What a listing shows: never the secret or key, only which is set and since when."""
    shown = {k: found.get(k) for k in ("type", "token_url", "client_id", "scope", "audience")}
    shown[found["kind"]] = {"secret": True, "set_at": found["set_at"]}
    return shown


def resealed(raw: bytes, sealer: Sealer, token: str) -> tuple[str, int]:
    """The field with its secret sealed under the current key, and 1 if it was not."""
    if json.loads(raw).get("type") != "oauth2":
        return raw.decode(), 0
    return resealed_in(raw, "secret", where(token), sealer)


def algorithm(pem: str) -> str:
    """The JWT algorithm a private key signs its assertions with; ValueError otherwise.
    cryptography's keys at first use, as app/models/client_cert.py's."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    key = serialization.load_pem_private_key(pem.encode(), None)
    if isinstance(key, rsa.RSAPrivateKey) and key.key_size >= MIN_RSA_BITS:
        return "RS256"
    if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
        return "ES256"
    raise ValueError("not an RSA key of 2048 bits or more, nor a P-256 EC key")


def _text(value: Any, where_: str, most: int = MAX_TEXT) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= most or not VALUE.fullmatch(value):
        raise InvalidInput(f"{where_} must be 1 to {most} characters of printable ASCII")
    return value


def parse_oauth2(value: dict[str, Any], where_: str, rules: Rules) -> OAuth2:
    unknown = set(value) - set(FIELDS)
    if unknown:
        raise InvalidInput(f"{where_}: unknown field {sorted(unknown)[0]!r}")
    for name in ("token_url", "client_id"):
        if name not in value:
            raise InvalidInput(f"{where_}.{name} is required for the oauth2 type")
    url = Callback().check(value["token_url"], f"{where_}.token_url", rules)
    client_id = _text(value["client_id"], f"{where_}.client_id")
    scope, audience = (
        None if value.get(k) is None else _text(value[k], f"{where_}.{k}")
        for k in ("scope", "audience")
    )
    given = [k for k in SECRETS if value.get(k) is not None]
    if len(given) > 1:
        raise InvalidInput(f"{where_}: give client_secret or private_key, not both")
    if not given:
        return OAuth2(url, client_id, scope, audience)
    kind = given[0]
    if kind == "client_secret":
        return OAuth2(url, client_id, scope, audience, kind, _text(value[kind], f"{where_}.{kind}"))
    key = value[kind]
    try:
        if not isinstance(key, str) or len(key) > MAX_KEY:
            raise ValueError(f"a string of at most {MAX_KEY:,} characters expected")
        algorithm(key)
    except (ValueError, TypeError) as exc:
        raise InvalidInput(
            f"{where_}.private_key must be an unencrypted PEM private key, RSA (2048 bits "
            f"or more) or P-256 EC: {exc}"
        ) from None
    return OAuth2(url, client_id, scope, audience, kind, key)


def shape_oauth2(rules: Rules) -> Doc:
    """Narrower than what busbar takes: a private key that parses cannot be generated
    from a schema, so the variant lists client_secret only (the description says)."""
    text = {"type": "string", "minLength": 1, "maxLength": MAX_TEXT,
            "pattern": f"^{VALUE.pattern}$"}  # fmt: skip
    return {
        "type": "object",
        "required": ["type", "token_url", "client_id", "client_secret"],
        "properties": {
            "type": {"type": "string", "enum": ["oauth2"]},
            "token_url": Callback().shape(rules),
            "client_id": text, "scope": text, "audience": text, "client_secret": text,
        },
        "additionalProperties": False,
    }  # fmt: skip
