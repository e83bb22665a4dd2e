"""Errors are JSON with the right status, even when Redis is gone."""

from __future__ import annotations

import redis
from flask.testing import FlaskClient

from app.web import create_app
from config.settings import Settings
from spec.app.web.conftest import ROOT, basic
from spec.conftest import ROOT_KEY
from workers.redis_server import free_port


def test_unknown_endpoint_is_json_404(http: FlaskClient):
    response = http.get("/no/such/thing")
    assert response.status_code == 404
    assert response.is_json
    assert response.get_json() == {"error": "no such endpoint"}


def test_wrong_method_is_json_405_with_allow(http: FlaskClient):
    response = http.put("/api_tokens", headers=ROOT)
    assert response.status_code == 405
    assert response.get_json()["error"]
    assert "GET" in response.headers["Allow"]


def test_health_needs_nothing(http: FlaskClient):
    body = http.get("/health").get_json()
    assert body["status"] == "ok"
    assert body["hiredis"] is True


def _app_without_redis() -> FlaskClient:
    url = f"redis://127.0.0.1:{free_port()}/0"
    settings = Settings(redis_url=url, root_key=ROOT_KEY)
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    return create_app(settings, client).test_client()


def test_pulse_is_503_when_redis_does_not_answer():
    http = _app_without_redis()
    response = http.get("/pulse", headers=ROOT)
    assert response.status_code == 503
    assert response.get_json()["error"]
    assert http.get("/health").status_code == 200


def test_client_auth_without_redis_is_503_not_500():
    response = _app_without_redis().get("/pulse", headers=basic("orders-token"))
    assert response.status_code == 503
    assert response.get_json() == {"error": "Redis is unavailable"}
