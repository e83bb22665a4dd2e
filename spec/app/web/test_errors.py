"""Errors are JSON with the right status, even when Redis is gone."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
import redis
from flask.testing import FlaskClient

from app.web import create_app
from config.settings import Settings
from dev import redis_server
from dev.redis_server import free_port
from spec.app.web.conftest import ROOT, basic, subscribe
from spec.conftest import ROOT_KEY


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
    assert response.headers["Retry-After"] == "1"


def test_publish_when_redis_is_out_of_memory_is_503_and_writes_nothing(
    http: FlaskClient, redis_client: redis.Redis, pub, sub
):
    """At maxmemory Redis refuses the publish script before it writes; the publisher
    must hear "retry" (503), not a 500, and a retry after the pressure is gone lands."""
    subscribe(http, sub, ["orders"])
    event = {"type": "create", "url": "https://o.test/1"}
    used = int(redis_client.info("memory")["used_memory"])
    redis_client.config_set("maxmemory", str(max(used // 2, 1024)))
    try:
        response = http.post("/topics/orders", json=event, headers=pub)
    finally:
        redis_client.config_set("maxmemory", "0")
    assert response.status_code == 503
    assert "out of memory" in response.get_json()["error"]
    assert response.headers["Retry-After"] == "1"
    assert http.get("/topics", headers=pub).get_json()[0]["events"] == 0
    assert http.post("/topics/orders", json=event, headers=pub).status_code == 204


def test_redis_busy_with_a_long_script_is_503_with_retry_after(
    http: FlaskClient, redis_url: str, redis_client: redis.Redis, pub
):
    """Another client's script past Redis's busy threshold: Redis answers BUSY to all."""
    redis_client.config_set("busy-reply-threshold", 50)
    other = redis.Redis.from_url(redis_url)
    spin = "local t = redis.call('TIME'); local s = t[1] + 2; " \
        "while tonumber(redis.call('TIME')[1]) < s do end return 1"  # fmt: skip
    busy = threading.Thread(target=lambda: other.eval(spin, 0), daemon=True)
    try:
        busy.start()
        time.sleep(0.3)
        response = http.post(
            "/topics/orders", json={"type": "create", "url": "https://o.test/1"}, headers=pub
        )
        assert response.status_code == 503
        assert response.headers["Retry-After"] == "1"
        assert "busy" in response.get_json()["error"]
    finally:
        busy.join(10)
        redis_client.config_set("busy-reply-threshold", 5000)
        other.close()


def own_address() -> str:
    """This machine's address on its default route (no packet is sent), or loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return "127.0.0.1"
        return str(probe.getsockname()[0])


def test_a_redis_that_turns_busbar_away_is_a_503_naming_why(tmp_path: Path):
    """A Valkey with no password reached from another host (a pod's address) answers
    DENIED to every command (protected mode): each request is a 503 saying so, not a
    500. Reached here through this machine's own non-loopback address."""
    address = own_address()
    if address.startswith("127."):
        pytest.skip("no address but loopback on this machine")
    server = redis_server.start(
        tmp_path, persistent=False, host="0.0.0.0", options={"protected-mode": "yes"}
    )
    try:
        url = f"redis://{address}:{server.port}/0"
        http = create_app(Settings(redis_url=url, root_key=ROOT_KEY)).test_client()
        response = http.post("/api_tokens", json={"name": "shop"}, headers=ROOT)
        assert response.status_code == 503
        assert response.get_json()["error"].startswith("Redis turns busbar away (DENIED)")
        assert response.headers["Retry-After"] == "10"
    finally:
        server.stop()
