"""Input meant to hurt the bus: oversized bodies (413, unread) and callbacks at
link-local or metadata addresses (400 unless the operator allows them)."""

from __future__ import annotations

import dataclasses
import io

import msgpack
import pytest
import redis
from flask.testing import FlaskClient

from app.web import create_app
from config.parsers import allowlist
from config.settings import Settings
from spec.app.web.conftest import ROOT, subscribe
from spec.conftest import ROOT_KEY

# what gunicorn hands over for a chunked request: no length, a stream it terminates
CHUNKED = {"Transfer-Encoding": "chunked"}
LIMIT_MESSAGE = "request body is larger than BUSBAR_MAX_BODY_BYTES (1048576 bytes)"


def _oversized() -> bytes:
    return b'[{"type": "noop", "url": "https://o.test/' + b"x" * (1 << 20) + b'"}]'


def test_declared_oversize_is_413_before_authentication(http: FlaskClient, pub):
    for headers in ({}, pub):
        response = http.post("/topics/orders", data=_oversized(), headers=headers)
        assert response.status_code == 413
        assert response.get_json() == {"error": LIMIT_MESSAGE}
    assert http.get("/topics", headers=pub).get_json() == []


def test_chunked_oversize_is_cut_off_while_read(http: FlaskClient, pub):
    response = http.post(
        "/topics/orders",
        input_stream=io.BytesIO(_oversized()),
        headers={**pub, **CHUNKED},
        environ_overrides={"wsgi.input_terminated": True},
    )
    assert response.status_code == 413
    assert response.get_json() == {"error": LIMIT_MESSAGE}
    assert http.get("/topics", headers=pub).get_json() == []


@pytest.mark.parametrize("size", [100, 1 << 20])
def test_chunked_body_up_to_the_limit_is_read(http: FlaskClient, pub, size: int):
    event = b'{"type": "noop", "url": "https://o.test/1"}'
    response = http.post(
        "/topics/orders",
        input_stream=io.BytesIO(event + b" " * (size - len(event))),
        headers={**pub, **CHUNKED},
        environ_overrides={"wsgi.input_terminated": True},
    )
    assert response.status_code == 204


def test_the_limit_follows_the_setting(redis_url: str, redis_client: redis.Redis):
    settings = Settings(redis_url=redis_url, root_key=ROOT_KEY, max_body_bytes=2048)
    http = create_app(settings, redis_client).test_client()
    response = http.post("/api_tokens", data=b"x" * 2049, headers=ROOT)
    assert response.status_code == 413
    assert "(2048 bytes)" in response.get_json()["error"]


def test_bulk_publish_of_500_largest_events_fits_the_default(http: FlaskClient, pub):
    """Worst case per event: a 1024-character URL and 64 bytes of msgpack data whose JSON
    escapes every character (\\u0001 is 6 bytes of JSON for 1 of msgpack)."""
    data = {"k": "\x01" * 58}
    assert len(msgpack.packb(data)) <= 64
    url = "https://o.test/" + "u" * (1024 - len("https://o.test/"))
    events = [{"type": "update", "url": url, "timestamp": 1, "data": data}] * 500
    response = http.post("/topics/orders", json=events, headers=pub)
    assert response.status_code == 204, response.get_json()
    assert 700_000 < int(response.request.headers["Content-Length"]) < 1 << 20


@pytest.mark.parametrize(
    ("callback", "network"),
    [
        ("https://169.254.169.254/latest/meta-data/", "169.254.0.0/16"),
        ("https://169.254.1.1:8443/in", "169.254.0.0/16"),
        ("https://2852039166/in", "169.254.0.0/16"),  # 169.254.169.254 as one number
        ("https://0xa9.0xfe.0xa9.0xfe/in", "169.254.0.0/16"),
        ("https://[::ffff:169.254.169.254]/in", "169.254.0.0/16"),
        ("https://[fe80::1]/in", "fe80::/10"),
        ("https://[fd00:ec2::254]/in", "fd00:ec2::254/128"),
    ],
)
def test_link_local_callback_is_400_and_changes_nothing(http: FlaskClient, sub, callback, network):
    subscribe(http, sub, ["orders"])
    response = http.post(
        "/subscription", json={"topics": ["other"], "callback": callback}, headers=sub
    )
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error.startswith("callback must not point at a link-local")
    assert network in error and "BUSBAR_ALLOW_LINK_LOCAL_CALLBACKS" in error
    (listed,) = http.get("/subscriptions", headers=sub).get_json()
    assert (listed["callback"], listed["topics"]) == ("https://sub.test/in", ["orders"])


def test_link_local_callback_is_allowed_by_the_setting(
    settings: Settings, redis_client: redis.Redis, sub
):
    allowing = dataclasses.replace(settings, allow_link_local_callbacks=True)
    http = create_app(allowing, redis_client).test_client()
    subscribe(http, sub, ["orders"], callback="https://169.254.169.254/in")
    assert (
        http.get("/subscriptions", headers=sub)
        .get_json()[0]["callback"]
        .startswith("https://169.254")
    )


def test_a_name_is_accepted_and_judged_when_the_worker_connects(http: FlaskClient, sub):
    subscribe(http, sub, ["orders"], callback="https://metadata.google.internal/in")


@pytest.mark.parametrize("callback", ["https://127.0.0.1:9/in", "https://10.0.0.8/in"])
def test_loopback_and_private_addresses_are_refused_unless_the_operator_opens_them(
    settings: Settings, redis_client: redis.Redis, http: FlaskClient, sub, callback: str
):
    response = http.post("/subscription", json={"topics": ["o"], "callback": callback}, headers=sub)
    assert response.status_code == 400
    assert "BUSBAR_CALLBACK_ALLOW" in response.get_json()["error"]
    opened = dataclasses.replace(settings, callback_allow=allowlist("127.0.0.0/8, 10.0.0.0/8"))
    subscribe(create_app(opened, redis_client).test_client(), sub, ["orders"], callback=callback)


EVENT_WITH = b'{"type": "create", "url": "https://a.test/1", "data": '


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/topics/orders", EVENT_WITH + b'{"n": 18446744073709551616}}',
         "data.n is an integer beyond 64 bits"),
        ("/topics/orders", EVENT_WITH + b'{"s": "\\ud800"}}', "not valid Unicode"),
        ("/api_tokens", b'{"name": "bad \\udc00 name"}', "not valid Unicode"),
        ("/subscription", b'{"topics": ["orders"], "callback": "https://a.test/\\ud83d"}',
         "not valid Unicode"),
    ],
)  # fmt: skip
def test_json_that_cannot_be_stored_is_a_400_not_a_500(http: FlaskClient, pub, path, body, message):
    headers = ROOT if path == "/api_tokens" else pub
    response = http.post(path, data=body, headers=headers)
    assert response.status_code == 400 and message in response.get_json()["error"]


def test_a_surrogate_pair_is_a_character_and_welcome(http: FlaskClient, pub):
    body = '{"type": "create", "url": "https://a.test/1", "data": {"s": "\\ud83d\\ude00"}}'
    assert http.post("/topics/orders", data=body, headers=pub).status_code == 204
