"""Reading and rotating signing secrets over HTTP, the subscription's event_ids flag, and
the publish id header; the secret never shows anywhere else."""

from __future__ import annotations

import time

import redis
from flask.testing import FlaskClient

from app import codec
from app.models import event_ids
from app.models.keys import Keys
from spec.app.web.conftest import ROOT, subscribe


def secret_of(http: FlaskClient, headers: dict[str, str]) -> dict:
    response = http.get("/subscriber/secret", headers=headers)
    assert response.status_code == 200, response.get_json()
    assert response.headers["Cache-Control"] == "no-store"
    return response.get_json()


def test_a_subscriber_has_a_secret_from_its_first_subscribe(http: FlaskClient, sub):
    assert http.get("/subscriber/secret", headers=sub).status_code == 404
    subscribe(http, sub, ["orders"])
    first = secret_of(http, sub)
    assert first["secret"].startswith("whsec_") and first["previous_until"] is None
    assert len(first["secret"]) == len("whsec_") + 44  # base64 of 32 bytes
    subscribe(http, sub, ["orders", "users"])
    assert secret_of(http, sub) == first


def test_a_client_rotates_its_secret_with_a_grace(http: FlaskClient, sub):
    subscribe(http, sub, ["orders"])
    old = secret_of(http, sub)["secret"]
    response = http.post("/subscriber/secret/rotate", headers=sub)
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    rotated = response.get_json()
    assert rotated["secret"] != old
    assert abs(rotated["previous_until"] - (time.time() * 1000 + 86_400_000)) < 5_000
    assert secret_of(http, sub) == rotated


def test_root_rotates_by_client_name_and_never_reads_the_secret(http: FlaskClient, sub):
    subscribe(http, sub, ["orders"])
    old = secret_of(http, sub)["secret"]
    for path in ("/subscribers/sub/secret/rotate", "/subscriptions/sub/secret/rotate"):
        response = http.post(path, headers=ROOT)
        assert response.status_code == 204 and response.get_data() == b""
        new = secret_of(http, sub)["secret"]
        assert new != old
        old = new
    assert http.get("/subscriber/secret", headers=ROOT).status_code == 403


def test_rotation_errors_name_the_problem(http: FlaskClient, sub):
    subscribe(http, sub, ["orders"])
    before = secret_of(http, sub)
    response = http.post("/subscribers/sub/secret/rotate", headers=ROOT, json={"grace": 1})
    assert response.status_code == 400
    assert response.get_json() == {"error": "this endpoint takes no request body"}
    response = http.post("/subscriber/secret/rotate", headers=sub, data="x")
    assert response.status_code == 400
    assert http.post("/subscribers/nobody/secret/rotate", headers=ROOT).status_code == 404
    assert http.post("/subscribers/a%01b/secret/rotate", headers=ROOT).status_code == 404  # nobody
    assert secret_of(http, sub) == before


def test_a_client_without_a_subscription_has_nothing_to_rotate(http: FlaskClient, sub):
    response = http.post("/subscriber/secret/rotate", headers=sub)
    assert response.status_code == 404
    assert response.get_json() == {"error": "no subscription for this client"}


def test_the_secret_shows_nowhere_else(http: FlaskClient, sub, redis_client: redis.Redis):
    subscribe(http, sub, ["orders"], event_ids=True)
    secret = secret_of(http, sub)["secret"]
    salt = redis_client.hget(Keys().subscriber("sub"), "secret_salt").decode()
    for headers in (sub, ROOT):
        listing = http.get("/subscriptions", headers=headers).get_data(as_text=True)
        assert '"event_ids":true' in listing
        assert secret not in listing and salt not in listing
    for path in ("/metrics", "/openapi.json", "/workers", "/history", "/topics"):
        text = http.get(path, headers=ROOT).get_data(as_text=True)
        assert secret not in text and salt not in text
        assert secret[6:20] not in text


def test_event_ids_must_be_a_boolean(http: FlaskClient, sub):
    body = {"topics": ["orders"], "callback": "https://sub.test/in", "event_ids": "yes"}
    response = http.post("/subscription", json=body, headers=sub)
    assert response.status_code == 400
    assert response.get_json() == {"error": "event_ids must be true or false"}
    response = http.post("/subscription", json={**body, "event_ids": None}, headers=sub)
    assert response.get_json() == {
        "error": "event_ids: null is not allowed; leave it out for the default"
    }  # busbar's own field: no null (docs/api.md, Nulls)
    subscribe(http, sub, ["orders"])
    (listed,) = http.get("/subscriptions", headers=sub).get_json()
    assert listed["event_ids"] is False


def test_an_idempotency_key_gives_the_publishs_events_their_ids(
    http: FlaskClient, pub, sub, redis_client: redis.Redis
):
    """What POST /topics stores for event ids: derived from (topic, key, position) with
    an Idempotency-Key, nothing without one (the id is then the event's content)."""
    subscribe(http, sub, ["orders"], max=10, timeout=60_000, event_ids=True)
    events = [{"type": "create", "url": f"https://o.test/{i}"} for i in (1, 2)]
    keyed = {**pub, "Idempotency-Key": "0f9a:batch-1.retry_2"}
    assert http.post("/topics/orders", json=events, headers=keyed).status_code == 204
    assert http.post("/topics/orders", json=events[0], headers=pub).status_code == 204
    entries = redis_client.lrange(Keys().batch("sub", 1), 3, -1)
    assert [codec.unpack_entry(e).stored_id for e in entries] == [
        event_ids.for_publish("orders", "0f9a:batch-1.retry_2", 0),
        event_ids.for_publish("orders", "0f9a:batch-1.retry_2", 1),
        None,
    ]
