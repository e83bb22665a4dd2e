"""POST /topics/<name> reaches the same publish two ways (app/web/publish.py): a body of
declared length is answered before Flask, a chunked one by the Flask view. A publisher
must not be able to tell them apart: same statuses, messages, headers, effects."""

from __future__ import annotations

import io
import json

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from app.redis_client import no_retry
from app.web import create_app
from config.settings import Settings
from spec.app.web.conftest import ROOT, basic, make_client, subscribe
from spec.app.web.test_hostile_input import CHUNKED
from spec.conftest import ROOT_KEY

EVENT = {"type": "create", "url": "https://orders.test/o/1", "data": {"id": 1}}
# name: (path, credentials of, body, extra headers)
CASES = {
    "one event": ("/topics/orders", "pub", EVENT, {}),
    "a bulk": ("/topics/orders", "pub", [EVENT, EVENT | {"type": "update"}], {}),
    "trailing slash": ("/topics/orders/", "pub", EVENT, {}),
    "empty array": ("/topics/orders", "pub", [], {}),
    "empty array, unknown token": ("/topics/orders", "nobody", [], {}),
    "with Idempotency-Key": ("/topics/orders", "pub", EVENT, {"Idempotency-Key": "k-1"}),
    "bad Idempotency-Key": ("/topics/orders", "pub", EVENT, {"Idempotency-Key": "a b"}),
    "bad JSON": ("/topics/orders", "pub", b'{"type": ', {}),
    "a bad event in a bulk": ("/topics/orders", "pub", [EVENT, {"type": "x"}], {}),
    "bad topic name": ("/topics/Orders", "pub", EVENT, {}),
    "unknown token, bad body": ("/topics/orders", "nobody", b"{", {}),
    "unknown token, good body": ("/topics/orders", "nobody", EVENT, {}),
    "malformed token": ("/topics/orders", "Not A Token", EVENT, {}),
    "root key": ("/topics/orders", ROOT_KEY, EVENT, {}),
    "no credentials": ("/topics/orders", None, EVENT, {}),
    "another publisher's topic": ("/topics/owned", "pub", EVENT, {}),
}


@pytest.fixture
def bus(http: FlaskClient, redis_client: redis.Redis) -> FlaskClient:
    """A publisher `pub`, a subscriber to `orders` and `owned`, `owned` claimed by `other`."""
    make_client(http, "pub")
    subscribe(http, make_client(http, "sub"), ["orders", "owned"])
    assert (
        http.post("/topics/owned", json=EVENT, headers=make_client(http, "other")).status_code
        == 204
    )
    return http


def send(http: FlaskClient, case: str, chunked: bool) -> tuple[int, object, str | None]:
    path, who, body, extra = CASES[case]
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {**(basic(who) if who else {}), **extra}
    if chunked:
        response = http.post(
            path,
            input_stream=io.BytesIO(raw),
            headers={**headers, **CHUNKED},
            environ_overrides={"wsgi.input_terminated": True},
        )
    else:
        response = http.post(path, data=raw, headers=headers)
    return (
        response.status_code,
        response.get_json(silent=True),
        response.headers.get("WWW-Authenticate"),
    )


def counts(http: FlaskClient) -> tuple[int, int]:
    """What a publish shows: events the subscriber has queued, events `orders` counted."""
    (listing,) = http.get("/subscriptions", headers=basic("sub")).get_json()
    topics = {t["name"]: t["events"] for t in http.get("/topics", headers=ROOT).get_json()}
    return listing["events"]["queued"], topics.get("orders", 0)


@pytest.mark.parametrize("case", CASES)
def test_both_ways_answer_alike_and_queue_alike(bus: FlaskClient, case: str):
    start = counts(bus)
    fast = send(bus, case, chunked=False)
    middle = counts(bus)
    flask = send(bus, case, chunked=True)
    end = counts(bus)
    assert fast == flask
    assert fast[0] in (204, 400, 401, 403)
    took = [m - s for m, s in zip(middle, start, strict=True)]
    if case == "with Idempotency-Key":  # the repeat is recognised: nothing more queued
        assert end == middle and took == [1, 1]
    else:
        assert [e - m for e, m in zip(end, middle, strict=True)] == took
        assert (took != [0, 0]) == (fast[0] == 204 and case != "empty array")


@pytest.fixture
def through_flask(app: Flask) -> list[str]:
    """Requests that went through Flask's request handling, seen by a hook of the test's
    own (registered before the app's first request, as Flask requires)."""
    seen: list[str] = []
    app.before_request(lambda: seen.append("flask") and None)
    return seen


def test_a_publish_of_declared_length_is_answered_before_flask(
    through_flask: list[str], bus: FlaskClient
):
    through_flask.clear()  # the bus fixture's own requests
    assert bus.post("/topics/orders", json=EVENT, headers=basic("pub")).status_code == 204
    assert through_flask == []
    assert bus.post("/topics/orders", json={"type": "x"}, headers=basic("pub")).status_code == 400
    assert through_flask == ["flask"]  # errors are Flask's to answer


def test_a_failed_publish_is_not_run_again_by_flask(bus: FlaskClient, redis_client):
    redis_client.config_resetstat()
    response = bus.post("/topics/owned", json=EVENT, headers=basic("pub"))
    assert response.status_code == 403
    assert redis_client.info("commandstats")["cmdstat_evalsha"]["calls"] == 1


def test_a_body_shorter_than_declared_is_a_400_and_queues_nothing(bus: FlaskClient):
    before = counts(bus)
    raw = json.dumps(EVENT).encode()
    response = bus.post(
        "/topics/orders",
        input_stream=io.BytesIO(raw),
        headers=basic("pub"),
        environ_overrides={"CONTENT_LENGTH": str(len(raw) + 10)},
    )
    assert response.status_code == 400
    assert "error" in response.get_json()
    assert counts(bus) == before


def test_redis_down_is_a_503_from_the_fast_path_too(redis_url: str, bus: FlaskClient):
    # nothing listens on port 1; no retries, as busbar's own clients (app/redis_client.py)
    dead = redis.Redis(port=1, socket_connect_timeout=0.5, retry=no_retry())
    http = create_app(Settings(redis_url=redis_url, root_key=ROOT_KEY), dead).test_client()
    response = http.post("/topics/orders", json=EVENT, headers=basic("pub"))
    assert (response.status_code, response.get_json()) == (503, {"error": "Redis is unavailable"})
    assert http.get("/topics", headers=ROOT).status_code == 503  # as any other endpoint
