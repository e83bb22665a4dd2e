"""A subscription's `client_cert`: a PEM certificate and the key that goes with it, not
expired; what is stored seals the key, and a listing shows the certificate's subject,
expiry and fingerprint, never the key or the PEM."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from app.errors import InvalidInput
from app.models.client_cert import REMOVE, ClientCert, described
from app.models.sealed import Sealer
from app.models.subscription import parse_subscription

BODY = {"topics": ["orders"], "callback": "https://s.test/hook"}


def pair(days: int = 2, name: str = "billing") -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=3)).not_valid_after(now + dt.timedelta(days=days))
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())  # fmt: skip
    return cert.public_bytes(serialization.Encoding.PEM).decode(), pem.decode()


def client_cert(value: object) -> ClientCert | str | None:
    return parse_subscription({**BODY, "client_cert": value}, allow_http=False).client_cert


def test_a_pair_is_taken_its_key_sealed_and_listed_without_it():
    cert, key = pair()
    given = client_cert({"cert": cert, "key": key})
    assert given == ClientCert(cert, key)
    assert client_cert({}) == REMOVE
    assert parse_subscription(BODY, allow_http=False).client_cert is None  # kept
    stored = given.stored(Sealer(b"k" * 32), "tok", 7)  # type: ignore[union-attr]
    assert key.split("\n")[1] not in stored
    shown = described(stored)
    assert shown is not None and shown["subject"] == "CN=billing" and shown["set_at"] == 7
    assert set(shown) == {"subject", "not_after", "fingerprint", "set_at"}
    assert json.loads(stored)["cert"] == cert


def test_what_cannot_be_presented_is_a_400_naming_it():
    cert, key = pair()
    _, other_key = pair()
    old_cert, old_key = pair(days=-1)
    cases = [
        ({"cert": "nope", "key": key}, "client_cert.cert is not a PEM certificate"),
        ({"cert": cert, "key": "nope"}, "client_cert.key is not an unencrypted PEM"),
        ({"cert": cert, "key": other_key}, "client_cert.key is not the key of client_cert.cert"),
        ({"cert": old_cert, "key": old_key}, "client_cert.cert expired on"),
        ({"cert": cert}, "client_cert.key must be a PEM string"),
        ({"cert": cert, "key": key, "chain": ""}, "unknown field 'chain'"),
        ({"cert": "x" * 20_000, "key": key}, "at most 16,384"),
        ("pem", "must be a JSON object"),
    ]
    for value, message in cases:
        with pytest.raises(InvalidInput, match=message):
            client_cert(value)
