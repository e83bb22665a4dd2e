"""Who may call what: the auth matrix over every endpoint built so far."""

from __future__ import annotations

import base64

import pytest
from flask.testing import FlaskClient

from spec.app.web.conftest import ROOT, basic

ENDPOINTS = [
    # method, path, json body, anyone, client, root
    ("GET", "/health", None, 200, 200, 200),
    ("GET", "/pulse", None, 401, 204, 204),
    ("GET", "/api_tokens", None, 401, 403, 200),
    ("POST", "/api_tokens", {"name": "billing"}, 401, 403, 201),
    ("DELETE", "/api_tokens/someone", None, 401, 403, 204),
    ("GET", "/pulse/scaling", None, 401, 204, 204),
    ("POST", "/topics/orders", {"type": "noop", "url": "https://o.test/1"}, 401, 204, 403),
    ("GET", "/topics", None, 401, 200, 200),
    ("DELETE", "/topics/nothing", None, 401, 404, 404),
    ("POST", "/subscription", {"topics": [], "callback": "https://s.test/in"}, 401, 204, 403),
    ("POST", "/subscriber", {"topics": [], "callback": "https://s.test/in"}, 401, 204, 403),
    ("GET", "/subscriptions", None, 401, 200, 200),
    ("GET", "/subscribers", None, 401, 200, 200),
    ("DELETE", "/subscriber/topics/nothing", None, 401, 404, 403),
    ("DELETE", "/subscriber", None, 401, 404, 403),
    ("GET", "/metrics", None, 401, 403, 200),
    ("GET", "/subscriber/deadletters", None, 401, 404, 403),
    ("POST", "/subscriber/deadletters/replay", None, 401, 404, 403),
    ("DELETE", "/subscriber/deadletters", None, 401, 404, 403),
]


@pytest.mark.parametrize(("method", "path", "body", "anyone", "client", "root"), ENDPOINTS)
def test_auth_matrix(
    http: FlaskClient, client_token: str, method, path, body, anyone, client, root
):
    def call(headers: dict[str, str]) -> int:
        return http.open(path, method=method, json=body, headers=headers).status_code

    assert call({}) == anyone
    assert call(basic("nobody-knows-me")) == anyone
    assert call(basic(client_token)) == client
    assert call(ROOT) == root


def test_missing_credentials_get_a_basic_challenge_and_json(http: FlaskClient):
    response = http.get("/pulse")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Basic")
    assert "error" in response.get_json()


@pytest.mark.parametrize(
    "header",
    [
        "Bearer orders-token",
        "Basic !!!not-base64!!!",
        "Basic " + base64.b64encode(b":password-only").decode(),
        "Basic",
        "Digest username=orders-token",
    ],
)
def test_malformed_authorization_is_401_not_500(http: FlaskClient, client_token: str, header):
    response = http.get("/pulse", headers={"Authorization": header})
    assert response.status_code == 401
    assert response.get_json()["error"]


def test_password_is_ignored(http: FlaskClient, client_token: str):
    header = "Basic " + base64.b64encode(f"{client_token}:anything at all".encode()).decode()
    assert http.get("/pulse", headers={"Authorization": header}).status_code == 204


def test_token_lookup_is_exact(http: FlaskClient, client_token: str):
    assert http.get("/pulse", headers=basic(client_token.upper())).status_code == 401
    assert http.get("/pulse", headers=basic(client_token + "x")).status_code == 401
    assert http.get("/pulse", headers=basic("root-key-for-tests")).status_code == 401


def test_forbidden_names_what_is_needed(http: FlaskClient, client_token: str):
    response = http.get("/api_tokens", headers=basic(client_token))
    assert response.status_code == 403
    assert "root key" in response.get_json()["error"]
