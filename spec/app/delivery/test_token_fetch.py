"""A token endpoint's request and answer as app/delivery/token_fetch.py makes and reads
them: client credentials as HTTP Basic (each part form-urlencoded) or an RFC 7523
assertion a JWT library verifies; an answer that is not a bearer token of a sane
shape is AuthFailed, its message naming the problem and never the token."""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs, unquote_plus

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from app.delivery.token_fetch import (
    ASSERTION_TYPE,
    DEFAULT_LIFETIME_S,
    MAX_TOKEN_ANSWER,
    AuthFailed,
    Fetched,
    read_answer,
    request_of,
)

CONFIG = {"type": "oauth2", "token_url": "https://idp.test/token", "client_id": "bill:ing",
          "scope": "events", "audience": "api", "kind": "client_secret"}  # fmt: skip


def test_a_secret_goes_as_basic_with_each_part_form_urlencoded():
    body, authorization = request_of(CONFIG, "s3 cr&t:x", 100)
    assert parse_qs(body.decode()) == {"grant_type": ["client_credentials"],
                                       "scope": ["events"], "audience": ["api"]}  # fmt: skip
    kind, _, encoded = authorization.partition(" ")
    user, _, password = base64.b64decode(encoded).decode().partition(":")
    assert kind == "Basic" and (unquote_plus(user), unquote_plus(password)) == (
        "bill:ing",
        "s3 cr&t:x",
    )


def test_a_private_key_signs_an_assertion_for_the_token_url():
    key = rsa.generate_private_key(65537, 2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()  # fmt: skip
    config = {**CONFIG, "kind": "private_key", "scope": None, "audience": None}
    body, authorization = request_of(config, pem, 1_000)
    form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
    assert authorization == "" and form["client_assertion_type"] == ASSERTION_TYPE
    assert form["client_id"] == "bill:ing" and "scope" not in form
    claims = jwt.decode(
        form["client_assertion"], key.public_key(), algorithms=["RS256"],
        audience="https://idp.test/token", options={"verify_exp": False},
    )  # fmt: skip
    assert claims["iss"] == claims["sub"] == "bill:ing"
    assert claims["exp"] - claims["iat"] == 60 and len(claims["jti"]) == 32
    again = parse_qs(request_of(config, pem, 1_000)[0].decode())["client_assertion"][0]
    assert jwt.decode(again, options={"verify_signature": False})["jti"] != claims["jti"]


def test_a_bearer_token_and_its_life():
    answer = json.dumps({"access_token": "tok.en", "token_type": "Bearer", "expires_in": 60})
    assert read_answer(200, answer.encode()) == Fetched("tok.en", 60)
    assert read_answer(200, b'{"access_token": "t", "expires_in": "90"}') == Fetched("t", 90)
    assert read_answer(200, b'{"access_token": "t"}') == Fetched("t", DEFAULT_LIFETIME_S)


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (
            401,
            b'{"error": "invalid_client", "error_description": "no"}',
            r"answered 401 \(invalid_client\)",
        ),
        (500, b"<html>oops</html>", "answered 500$"),
        (400, b'{"error": "a\\nb"}', "answered 400$"),
        (200, b"<html>", "not a JSON object"),
        (200, b"[1]", "not a JSON object"),
        (200, b'{"access_token": "x" }' + b" " * MAX_TOKEN_ANSWER, "under 16 KiB"),
        (200, b'{"token_type": "bearer"}', "no access_token"),
        (200, b'{"access_token": "a b"}', "no access_token"),
        (200, b'{"access_token": "a\\r\\nX-Evil: 1"}', "no access_token"),
        (200, b'{"access_token": 3}', "no access_token"),
        (200, b'{"access_token": "t", "token_type": "mac"}', "token_type is not bearer"),
        (200, b'{"access_token": "t", "expires_in": 0}', "expires_in"),
        (200, b'{"access_token": "t", "expires_in": true}', "expires_in"),
        (200, b'{"access_token": "t", "expires_in": "soon"}', "expires_in"),
    ],
)
def test_nonsense_is_auth_failed_naming_it_and_never_the_token(
    status: int, body: bytes, message: str
):
    with pytest.raises(AuthFailed, match=message) as failed:
        read_answer(status, body)
    assert "X-Evil" not in failed.value.message and "a b" not in failed.value.message
