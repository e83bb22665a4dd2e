"""A subscription's TLS client certificate (`client_cert: {"cert": PEM, "key": PEM}`),
presented to its https callback: for receivers behind a mesh or a gateway that admits
only clients with a certificate of their CA (mutual TLS).

The certificate is public and kept as given; the private key is a secret, sealed before
Redis holds it (app/models/sealed.py) and never listed: a listing shows the
certificate's subject, expiry, SHA-256 fingerprint and when it was set. Both are
checked at subscribe: PEM, one certificate, a key of that certificate, not expired.
Absent, a changed subscription keeps its own; `{}` removes it (the bus-wide
BUSBAR_CLIENT_CERT, if any, applies again).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.errors import InvalidInput
from app.models.fields import Doc, Field, Rules
from app.models.sealed import Sealer, resealed_in

MAX_PEM = 16_384  # characters of the certificate, and of the key
REMOVE = "-"  # subscribe.lua: the stored certificate removed


@dataclass(frozen=True)
class ClientCert:
    cert: str  # PEM
    key: str  # PEM, unencrypted

    def stored(self, sealer: Sealer, token: str, now: int) -> str:
        """subscribe.lua's `client_cert` argument: the key sealed, what a listing shows
        worked out once."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes

        parsed = x509.load_pem_x509_certificate(self.cert.encode())
        return json.dumps(
            {
                "cert": self.cert,
                "key": sealer.seal(self.key, where(token)),
                "subject": parsed.subject.rfc4514_string(),
                "not_after": int(parsed.not_valid_after_utc.timestamp() * 1000),
                "fingerprint": parsed.fingerprint(hashes.SHA256()).hex(),
                "set_at": now,
            },
            separators=(",", ":"),
        )


def where(token: str) -> str:
    """A key's place, the associated data of its seal."""
    return f"subscriber {token} client key"


def resealed(raw: bytes, sealer: Sealer, token: str) -> tuple[str, int]:
    """The field with its key sealed under the current key, and 1 if it was not."""
    return resealed_in(raw, "key", where(token), sealer)


def described(text: bytes | str | None) -> dict[str, Any] | None:
    """What a listing shows: never the key, nor the certificate's PEM."""
    if not text:
        return None
    found = json.loads(text)
    return {k: found[k] for k in ("subject", "not_after", "fingerprint", "set_at")}


def parse(value: dict[str, Any], where_: str) -> ClientCert:
    # cryptography's x509 and keys at first use: most buses hold no client certificate,
    # and every busbar process would load them at start (about 20 ms of its CPU)
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    unknown = set(value) - {"cert", "key"}
    if unknown:
        raise InvalidInput(f"{where_}: unknown field {sorted(unknown)[0]!r}")
    texts = {}
    for name in ("cert", "key"):
        given = value.get(name)
        if not isinstance(given, str) or not 1 <= len(given) <= MAX_PEM:
            raise InvalidInput(
                f"{where_}.{name} must be a PEM string of at most {MAX_PEM:,} characters"
            )
        texts[name] = given
    try:
        cert = x509.load_pem_x509_certificate(texts["cert"].encode())
    except ValueError:
        raise InvalidInput(f"{where_}.cert is not a PEM certificate") from None
    try:
        key = serialization.load_pem_private_key(texts["key"].encode(), None)
    except (ValueError, TypeError):
        raise InvalidInput(
            f"{where_}.key is not an unencrypted PEM private key (PKCS#8, or the key's own)"
        ) from None
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    if key.public_key().public_bytes(der, public) != cert.public_key().public_bytes(der, public):
        raise InvalidInput(f"{where_}.key is not the key of {where_}.cert")
    if cert.not_valid_after_utc <= datetime.now(UTC):
        raise InvalidInput(f"{where_}.cert expired on {cert.not_valid_after_utc.date()}")
    return ClientCert(texts["cert"], texts["key"])


@dataclass(frozen=True)
class ClientCertField(Field):
    """The `client_cert` field of POST /subscription: a ClientCert, or REMOVE for `{}`."""

    nullable: bool = False  # a null is a 400 naming the field (app/models/subscription.py)
    description: str = (
        '{"cert": PEM, "key": PEM}: a TLS client certificate presented to an https '
        "callback (mutual TLS); the key is sealed at rest and never listed. {} removes "
        "it; absent, a changed subscription keeps its own"
    )

    def check(self, value: Any, where: str, rules: Rules) -> ClientCert | str:  # noqa: ARG002
        if not isinstance(value, dict):
            raise InvalidInput(f"{where} must be a JSON object with `cert` and `key`")
        return REMOVE if not value else parse(value, where)

    def shape(self, rules: Rules) -> Doc:  # noqa: ARG002
        """Narrower than what busbar takes: only `{}` (a PEM pair that parses cannot be
        generated from a schema); the description says the rest."""
        return {"type": "object", "maxProperties": 0}
