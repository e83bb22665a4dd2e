"""`auth: {"type": "oauth2", ...}` of POST /subscription: what it takes (a token URL held
to the callbacks' rules, a client id, a secret or a private key of a kind that signs),
what is a 400 naming the problem, how it is stored (the secret sealed, kept when a
change gives none) and listed (never the secret)."""

from __future__ import annotations

import ipaddress
import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from app.errors import InvalidInput
from app.models.callback_auth import Auth, described_auth
from app.models.callback_policy import Policy
from app.models.oauth2 import OAuth2, algorithm, fingerprint, resealed, where
from app.models.sealed import Sealer
from app.models.subscription import parse_subscription

BODY = {"topics": ["orders"], "callback": "https://s.test/hook"}
GIVEN = {"type": "oauth2", "token_url": "https://idp.test/token", "client_id": "billing"}
SEALER = Sealer(b"k" * 32)


def pem(key: object) -> str:
    return key.private_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()  # fmt: skip


def auth(value: object, **rules: object) -> Auth | None:
    return parse_subscription({**BODY, "auth": value}, allow_http=False, **rules).auth  # type: ignore[arg-type]


def test_a_secret_or_a_key_with_scope_and_audience():
    found = auth({**GIVEN, "client_secret": "s3", "scope": "events write", "audience": "api"})
    url = "https://idp.test/token"
    expected = OAuth2(url, "billing", "events write", "api", "client_secret", "s3")
    assert found == Auth("oauth2", oauth2=expected)
    key = pem(ec.generate_private_key(ec.SECP256R1()))
    found = auth({**GIVEN, "private_key": key})
    assert found is not None and found.oauth2 is not None
    assert found.oauth2.secret_kind == "private_key" and algorithm(key) == "ES256"
    assert algorithm(pem(rsa.generate_private_key(65537, 2048))) == "RS256"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({**GIVEN, "client_secret": "s", "grant": "x"}, "unknown field 'grant'"),
        ({"type": "oauth2", "client_id": "c"}, "auth.token_url is required"),
        ({"type": "oauth2", "token_url": "https://idp.test/t"}, "auth.client_id is required"),
        ({**GIVEN, "token_url": "http://idp.test/t", "client_secret": "s"}, "https"),
        ({**GIVEN, "token_url": "https://127.0.0.1/t", "client_secret": "s"}, "127.0.0.1"),
        ({**GIVEN, "token_url": "https://u:p@idp.test/t", "client_secret": "s"}, "user"),
        ({**GIVEN, "client_id": "", "client_secret": "s"}, "client_id must be 1 to 512"),
        ({**GIVEN, "client_secret": "a\r\nb"}, "client_secret must be 1 to 512"),
        ({**GIVEN, "client_secret": "s", "private_key": "k"}, "not both"),
        ({**GIVEN, "scope": 3, "client_secret": "s"}, "scope must be"),
        ({**GIVEN, "private_key": "-----BEGIN PRIVATE KEY-----\nxx"}, "PEM private key"),
        ({**GIVEN, "private_key": pem(rsa.generate_private_key(65537, 1024))}, "2048"),
        ({**GIVEN, "private_key": pem(ec.generate_private_key(ec.SECP384R1()))}, "P-256"),
    ],
)
def test_what_cannot_be_is_a_400_naming_it(value: object, message: str):
    with pytest.raises(InvalidInput, match=message):
        auth(value)


def test_the_token_url_follows_the_callback_policy_that_opens_internal_hosts():
    opened = Policy(allow=(ipaddress.ip_network("127.0.0.0/8"),))
    found = auth({**GIVEN, "token_url": "https://127.0.0.1:9/t", "client_secret": "s"},
                 policy=opened)  # fmt: skip
    assert found is not None and found.oauth2 is not None


def test_stored_sealed_kept_without_a_new_secret_and_listed_without_it():
    given = auth({**GIVEN, "client_secret": "s3cr3t-value"})
    assert given is not None
    text = given.stored(None, SEALER, "tok", 5)
    assert "s3cr3t-value" not in text
    stored = json.loads(text)
    assert SEALER.open(stored["secret"], where("tok")) == "s3cr3t-value"
    assert described_auth(text) == {
        "type": "oauth2", "token_url": "https://idp.test/token", "client_id": "billing",
        "scope": None, "audience": None, "client_secret": {"secret": True, "set_at": 5},
    }  # fmt: skip
    again = auth({**GIVEN, "scope": "events"})  # no secret: the stored one stays
    assert again is not None
    kept = json.loads(again.stored(text.encode(), SEALER, "tok", 9))
    assert kept["secret"] == stored["secret"] and kept["set_at"] == 5 and kept["scope"] == "events"
    assert fingerprint(text.encode()) != fingerprint(json.dumps(kept).encode())
    same = auth({**GIVEN, "client_secret": "s3cr3t-value"})  # posted again, unchanged
    assert same is not None and same.stored(text.encode(), SEALER, "tok", 7) == text
    other = auth({**GIVEN, "client_secret": "another"})
    assert other is not None
    replaced = json.loads(other.stored(text.encode(), SEALER, "tok", 7))
    assert replaced["set_at"] == 7 and SEALER.open(replaced["secret"], where("tok")) == "another"
    elsewhere = same.stored(text.encode(), Sealer(b"x" * 32), "tok", 8)  # does not open
    assert json.loads(elsewhere)["set_at"] == 8
    with pytest.raises(InvalidInput, match="client_secret or private_key is required"):
        again.stored(None, SEALER, "tok", 9)
    with pytest.raises(InvalidInput, match="client_secret or private_key is required"):
        again.stored(b'{"type":"jwt","audience":null}', SEALER, "tok", 9)


def test_a_secret_sealed_under_a_former_key_is_sealed_again():
    former = Sealer(b"o" * 32)
    given = auth({**GIVEN, "client_secret": "s"})
    assert given is not None
    text = given.stored(None, former, "tok", 1).encode()
    rotated = Sealer(b"n" * 32, [b"o" * 32])
    new, count = resealed(text, rotated, "tok")
    assert count == 1 and rotated.is_current(json.loads(new)["secret"])
    assert resealed(new.encode(), rotated, "tok")[1] == 0
    assert resealed(b'{"type":"jwt","audience":null}', rotated, "tok")[1] == 0
