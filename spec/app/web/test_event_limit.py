"""The event data limit, BUSBAR_MAX_EVENT_DATA: 256 KiB by default, Routemaster's 64
bytes only when set; a 400 over it names the setting; and the request body limit
(BUSBAR_MAX_BODY_BYTES, 1 MiB) holds an event at the data limit, while a bulk publish of
many refuses with its 413 before a byte is read."""

from __future__ import annotations

import json

import msgpack
import redis
from flask.testing import FlaskClient

from app.web import create_app
from config.settings import Settings
from spec.app.web.conftest import make_client, subscribe
from spec.app.web.test_event_data import queued_data
from spec.conftest import ROOT_KEY

LIMIT = 256 * 1024


def data_of(size: int) -> dict[str, str]:
    """A data object of exactly `size` bytes of msgpack."""
    overhead = len(msgpack.packb({"p": ""}))
    data = {"p": "x" * (size - overhead)}
    while len(msgpack.packb(data)) > size:  # a longer string's header takes a byte or two
        data["p"] = data["p"][:-1]
    assert len(msgpack.packb(data)) == size
    return data


def event(size: int) -> dict:
    return {"type": "create", "url": "https://o.test/1", "data": data_of(size)}


def test_ten_kilobytes_of_data_are_welcome_by_default(http: FlaskClient, pub, sub, redis_client):
    subscribe(http, sub, ["orders"])
    body = {"type": "create", "url": "https://o.test/1", "data": {"note": "n" * 10_000}}
    response = http.post("/topics/orders", json=body, headers=pub)
    assert response.status_code == 204, response.get_json()
    assert queued_data(redis_client) == [body["data"]]


def test_the_default_limit_is_256_kib_and_its_400_names_the_setting(http: FlaskClient, pub, sub):
    subscribe(http, sub, ["orders"])
    assert http.post("/topics/orders", json=event(LIMIT), headers=pub).status_code == 204
    response = http.post("/topics/orders", json=event(LIMIT + 1), headers=pub)
    assert response.status_code == 400
    assert response.get_json() == {
        "error": f"data is {LIMIT + 1} bytes of msgpack, over the {LIMIT} allowed "
        "(BUSBAR_MAX_EVENT_DATA)"
    }


def test_routemasters_64_bytes_hold_when_set(redis_url: str, redis_client: redis.Redis):
    settings = Settings.from_env(
        {"BUSBAR_REDIS_URL": redis_url, "BUSBAR_ROOT_KEY": ROOT_KEY, "BUSBAR_MAX_EVENT_DATA": "64"}
    )
    http = create_app(settings, redis_client).test_client()
    pub = make_client(http, "pub")
    assert http.post("/topics/orders", json=event(64), headers=pub).status_code == 204
    response = http.post("/topics/orders", json=[event(64), event(65)], headers=pub)
    assert response.status_code == 400
    assert response.get_json() == {
        "error": "event 1: data is 65 bytes of msgpack, over the 64 allowed (BUSBAR_MAX_EVENT_DATA)"
    }


def test_a_bulk_publish_of_100_events_at_the_limit_is_the_body_limits_413(
    http: FlaskClient, pub, sub, redis_client
):
    """26 MB of JSON: refused unread, nothing queued; three such events fit one request."""
    subscribe(http, sub, ["orders"])
    bulk = json.dumps([event(LIMIT)] * 100)
    response = http.post("/topics/orders", data=bulk, headers=pub)
    assert response.status_code == 413
    assert response.get_json() == {
        "error": "request body is larger than BUSBAR_MAX_BODY_BYTES (1048576 bytes)"
    }
    assert queued_data(redis_client) == []
    three = [event(LIMIT)] * 3
    assert http.post("/topics/orders", json=three, headers=pub).status_code == 204
    assert len(queued_data(redis_client)) == 3


def test_an_event_at_the_limit_fits_the_body_limit_even_escaped(http: FlaskClient, pub, sub):
    """Text of any script, every character escaped as \\uXXXX, is at most 3 bytes of JSON
    for each byte of msgpack: an event at 256 KiB of such data is under 1 MiB of body."""
    subscribe(http, sub, ["orders"])
    text = "é" * ((LIMIT - 8) // 2)  # 2 bytes of msgpack, 6 of JSON each
    body = json.dumps({"type": "create", "url": "https://o.test/1", "data": {"t": text}})
    assert len(msgpack.packb({"t": text})) <= LIMIT and len(body) > 3 * LIMIT - 100
    assert http.post("/topics/orders", data=body, headers=pub).status_code == 204
