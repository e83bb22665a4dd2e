from __future__ import annotations

import base64

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from app.web import create_app
from config.settings import Settings
from spec.conftest import ROOT_KEY


def basic(token: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{token}:x".encode()).decode()}


ROOT = basic(ROOT_KEY)


@pytest.fixture
def app(settings: Settings, redis_client: redis.Redis) -> Flask:
    return create_app(settings, redis_client)


@pytest.fixture
def http(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def client_token(http: FlaskClient) -> str:
    response = http.post(
        "/api_tokens", json={"name": "orders", "token": "orders-token"}, headers=ROOT
    )
    assert response.status_code == 201
    return "orders-token"


def make_client(http: FlaskClient, token: str) -> dict[str, str]:
    response = http.post("/api_tokens", json={"name": token, "token": token}, headers=ROOT)
    assert response.status_code == 201
    return basic(token)


@pytest.fixture
def pub(http: FlaskClient) -> dict[str, str]:
    """Auth headers of a publishing client."""
    return make_client(http, "pub")


@pytest.fixture
def sub(http: FlaskClient) -> dict[str, str]:
    """Auth headers of a subscribing client."""
    return make_client(http, "sub")


def subscribe(http: FlaskClient, headers: dict[str, str], topics: list, **extra) -> None:
    body = {"topics": topics, "callback": "https://sub.test/in", **extra}
    response = http.post("/subscription", json=body, headers=headers)
    assert response.status_code == 204, response.get_json()
