"""/api_tokens: create, list, delete, and every way a request can be wrong."""

from __future__ import annotations

import re

import pytest
from flask.testing import FlaskClient

from spec.app.web.conftest import ROOT, basic
from spec.conftest import ROOT_KEY


def test_list_is_204_when_there_are_no_tokens(http: FlaskClient):
    response = http.get("/api_tokens", headers=ROOT)
    assert response.status_code == 204
    assert response.data == b""


def test_create_with_default_token_follows_routemaster_shape(http: FlaskClient):
    response = http.post("/api_tokens", json={"name": "Orders Service"}, headers=ROOT)
    assert response.status_code == 201
    body = response.get_json()
    assert body["name"] == "Orders Service"
    assert re.fullmatch(r"orders_service--[0-9a-f]{32}", body["token"])
    # the new token works at once
    assert http.get("/pulse", headers=basic(body["token"])).status_code == 204


def test_default_token_of_a_long_name_still_fits_the_token_rule(http: FlaskClient):
    response = http.post("/api_tokens", json={"name": "N" * 64}, headers=ROOT)
    assert response.status_code == 201
    assert re.fullmatch(r"[a-z0-9:_-]{1,64}", response.get_json()["token"])


def test_create_with_explicit_token_and_list_them(http: FlaskClient):
    for name, token in [("zeta", "zeta-1"), ("alpha", "alpha:1")]:
        assert (
            http.post("/api_tokens", json={"name": name, "token": token}, headers=ROOT).status_code
            == 201
        )
    response = http.get("/api_tokens", headers=ROOT)
    assert response.status_code == 200
    assert response.get_json() == [
        {"name": "alpha", "token": "alpha:1", "operator": False},
        {"name": "zeta", "token": "zeta-1", "operator": False},
    ]


def test_reposting_the_same_token_is_idempotent(http: FlaskClient):
    body = {"name": "orders", "token": "orders-1"}
    assert http.post("/api_tokens", json=body, headers=ROOT).status_code == 201
    assert http.post("/api_tokens", json=body, headers=ROOT).status_code == 201
    assert len(http.get("/api_tokens", headers=ROOT).get_json()) == 1


def test_a_token_is_never_given_to_another_client(http: FlaskClient):
    assert (
        http.post("/api_tokens", json={"name": "orders", "token": "t-1"}, headers=ROOT).status_code
        == 201
    )
    response = http.post("/api_tokens", json={"name": "billing", "token": "t-1"}, headers=ROOT)
    assert response.status_code == 409
    listed = http.get("/api_tokens", headers=ROOT).get_json()
    assert listed == [{"name": "orders", "token": "t-1", "operator": False}]


def test_the_operator_mark_goes_with_its_token(http: FlaskClient):
    marked = {"name": "noc", "token": "noc-1", "operator": True}
    assert http.post("/api_tokens", json=marked, headers=ROOT).get_json()["operator"] is True
    again = http.post("/api_tokens", json={"name": "noc", "token": "noc-1"}, headers=ROOT)
    assert again.get_json()["operator"] is True  # re-posting without it keeps the mark
    assert http.delete("/api_tokens/noc-1", headers=ROOT).status_code == 204
    fresh = http.post("/api_tokens", json={"name": "noc", "token": "noc-1"}, headers=ROOT)
    assert fresh.get_json()["operator"] is False  # a new client of the same token: unmarked
    made_up = http.post("/api_tokens", json={"name": "pager", "operator": True}, headers=ROOT)
    assert made_up.status_code == 201 and made_up.get_json()["operator"] is True


def test_delete_revokes_access_and_is_always_204(http: FlaskClient, client_token: str):
    assert http.delete(f"/api_tokens/{client_token}", headers=ROOT).status_code == 204
    assert http.get("/pulse", headers=basic(client_token)).status_code == 401
    assert http.delete(f"/api_tokens/{client_token}", headers=ROOT).status_code == 204
    assert http.delete("/api_tokens/NOT a valid token", headers=ROOT).status_code == 204


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (b"{not json", "not valid JSON"),
        (b'{"name": NaN}', "not valid JSON"),
        (b"[]", "JSON object"),
        (b'"orders"', "JSON object"),
        (b"{}", "missing key(s): name"),
        (b'{"name": "a", "colour": "red"}', "unknown key(s): colour"),
        (b'{"name": 12}', "name must be a string"),
        (b'{"name": "  "}', "name must not be empty"),
        (b'{"name": "' + b"n" * 65 + b'"}', "at most 64"),
        (b'{"name": "a\\u0000b"}', "control characters"),
        (b'{"name": "a", "token": "UPPER"}', "token must match"),
        (b'{"name": "a", "token": "has space"}', "token must match"),
        (b'{"name": "a", "token": ""}', "token must match"),
        (b'{"name": "a", "token": 5}', "token must match"),
        (b'{"name": "a", "token": "' + b"t" * 65 + b'"}', "token must match"),
        (b'{"name": "a", "token": "' + ROOT_KEY.encode() + b'"}', "root key"),
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
    ],
)
def test_bad_bodies_are_400_with_a_message_and_change_nothing(http: FlaskClient, data, message):
    response = http.post(
        "/api_tokens", data=data, headers={**ROOT, "Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert message in response.get_json()["error"]
    assert http.get("/api_tokens", headers=ROOT).status_code == 204


def test_body_without_json_content_type_is_still_read(http: FlaskClient):
    response = http.post(
        "/api_tokens", data=b'{"name": "plain"}', headers={**ROOT, "Content-Type": "text/plain"}
    )
    assert response.status_code == 201


def test_oversized_body_is_413(http: FlaskClient, app):
    big = b'{"name": "' + b"x" * (app.config["MAX_CONTENT_LENGTH"] + 10) + b'"}'
    response = http.post("/api_tokens", data=big, headers=ROOT)
    assert response.status_code == 413
    assert "larger than BUSBAR_MAX_BODY_BYTES" in response.get_json()["error"]
