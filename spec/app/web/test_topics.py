"""Publishing and topics over the API: status codes, validation, claims, counters."""

from __future__ import annotations

import pytest
import redis
from flask.testing import FlaskClient

from app.models.keys import Keys
from spec.app.web.conftest import ROOT, basic, make_client, subscribe

EVENT = {"type": "create", "url": "https://orders.test/o/1", "data": {"id": 1}}


def queued(http: FlaskClient, headers) -> int:
    (listing,) = http.get("/subscriptions", headers=headers).get_json()
    return listing["events"]["queued"]


def test_publish_is_204_and_queues_for_subscribers(http: FlaskClient, pub, sub):
    subscribe(http, sub, ["orders"])
    response = http.post("/topics/orders", json=EVENT, headers=pub)
    assert response.status_code == 204
    assert response.data == b""
    assert queued(http, sub) == 1


def test_publish_as_the_ruby_client_sends_it(http: FlaskClient, pub, sub):
    subscribe(http, sub, ["orders"])
    body = {"type": "update", "url": "https://orders.test/o/1", "timestamp": None, "data": None}
    response = http.post(
        "/topics/orders", json=body, headers={**pub, "Content-Type": "application/json"}
    )
    assert response.status_code == 204
    assert queued(http, sub) == 1


def test_bulk_publish_queues_every_event(http: FlaskClient, pub, sub):
    subscribe(http, sub, ["orders"])
    events = [{"type": "create", "url": f"https://orders.test/o/{i}"} for i in range(250)]
    assert http.post("/topics/orders", json=events, headers=pub).status_code == 204
    assert queued(http, sub) == 250
    topics = http.get("/topics", headers=pub).get_json()
    assert topics == [
        {
            "name": "orders",
            "publisher": "pub",
            "events": 250,
            "publisher_name": "pub",
            "schemas": {},
        }
    ]


def test_bulk_publish_is_all_or_nothing(
    http: FlaskClient, pub, sub, redis_client: redis.Redis, keys
):
    subscribe(http, sub, ["orders"])
    events = [EVENT, EVENT, {"type": "create", "url": "https://orders.test/o/1?x=1"}]
    response = http.post("/topics/orders", json=events, headers=pub)
    assert response.status_code == 400
    assert response.get_json()["error"].startswith("event 2: url must not have a query string")
    assert queued(http, sub) == 0
    assert not redis_client.exists(keys.topic("orders"))  # not even claimed


def test_empty_bulk_publish_does_nothing(http: FlaskClient, pub):
    assert http.post("/topics/orders", json=[], headers=pub).status_code == 204
    assert http.get("/topics", headers=pub).get_json() == []


def test_first_publisher_owns_the_topic(http: FlaskClient, pub, sub):
    assert http.post("/topics/orders", json=EVENT, headers=pub).status_code == 204
    other = make_client(http, "intruder")
    response = http.post("/topics/orders", json=EVENT, headers=other)
    assert response.status_code == 403
    assert "another publisher" in response.get_json()["error"]
    assert http.get("/topics", headers=pub).get_json()[0]["events"] == 1


@pytest.mark.parametrize("body", [EVENT, [EVENT, EVENT], [], {"type": "nope"}, "not json"])
def test_unknown_or_deleted_tokens_get_401_whatever_the_body(http: FlaskClient, pub, sub, body):
    """The token is checked inside the publish script, but the answer is the same as
    everywhere else: 401 before any 400, and nothing written."""
    subscribe(http, sub, ["orders"])
    gone = make_client(http, "gone")
    assert http.delete("/api_tokens/gone", headers=ROOT).status_code == 204
    for headers in (gone, basic("never-existed"), basic("Not A Token")):
        response = http.post("/topics/orders", json=body, headers=headers)
        assert response.status_code == 401, response.get_json()
        assert response.headers["WWW-Authenticate"].startswith("Basic")
    (topic,) = http.get("/topics", headers=pub).get_json()
    assert (topic["publisher"], topic["events"]) == (None, 0)  # not claimed, not counted
    assert queued(http, sub) == 0


def test_root_cannot_publish(http: FlaskClient):
    assert http.post("/topics/orders", json=EVENT, headers=ROOT).status_code == 403


@pytest.mark.parametrize("name", ["Orders", "orders-1", "o" * 65, "ord3rs"])
def test_bad_topic_names_are_400(http: FlaskClient, pub, name):
    response = http.post(f"/topics/{name}", json=EVENT, headers=pub)
    assert response.status_code == 400
    assert "topic name must match" in response.get_json()["error"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (b"{", "not valid JSON"),
        (b"42", "must be a JSON object"),
        (b'[{"type": "create", "url": "https://a.test/1"}, 7]', "event 1: an event must be"),
        (b'{"type": "create", "url": "https://a.test/1", "extra": 1}', "unknown key(s) in event"),
    ],
)
def test_bad_bodies(http: FlaskClient, pub, data, message):
    response = http.post("/topics/orders", data=data, headers=pub)
    assert response.status_code == 400
    assert message in response.get_json()["error"]


def test_topics_listing_counts_at_once(http: FlaskClient, pub, sub):
    subscribe(http, sub, ["users"])
    for _ in range(3):
        http.post("/topics/orders", json=EVENT, headers=pub)
    listing = http.get("/topics", headers=sub).get_json()
    assert listing == [
        {"name": "orders", "publisher": "pub", "events": 3, "publisher_name": "pub", "schemas": {}},
        {"name": "users", "publisher": None, "events": 0, "publisher_name": None, "schemas": {}},
    ]
    assert http.get("/topics", headers=ROOT).get_json() == listing


def test_delete_topic_unsubscribes_everyone_but_keeps_queued_events(http: FlaskClient, pub, sub):
    subscribe(http, sub, ["orders", "users"])
    http.post("/topics/orders", json=EVENT, headers=pub)
    assert http.delete("/topics/orders", headers=pub).status_code == 204
    (listing,) = http.get("/subscriptions", headers=sub).get_json()
    assert listing["topics"] == ["users"]
    assert listing["events"]["queued"] == 1
    assert [t["name"] for t in http.get("/topics", headers=pub).get_json()] == ["users"]
    assert http.delete("/topics/orders", headers=pub).status_code == 404


def test_delete_topic_needs_its_publisher_or_root(
    http: FlaskClient, pub, sub, redis_client, keys: Keys
):
    http.post("/topics/orders", json=EVENT, headers=pub)
    assert http.delete("/topics/orders", headers=sub).status_code == 403
    assert http.delete("/topics/orders", headers=ROOT).status_code == 204
    assert not redis_client.exists(keys.topic("orders"))
    # a deleted topic can be claimed afresh
    assert http.post("/topics/orders", json=EVENT, headers=sub).status_code == 204


def test_a_publish_repeated_with_its_idempotency_key_is_queued_once(http: FlaskClient, pub, sub):
    subscribe(http, sub, ["orders"])
    event = {"type": "create", "url": "https://o.test/1"}
    for _ in range(2):
        response = http.post(
            "/topics/orders", json=event, headers={**pub, "Idempotency-Key": "pub-0001"}
        )
        assert response.status_code == 204
    (listed,) = http.get("/subscriptions", headers=sub).get_json()
    assert listed["events"]["queued"] == 1
    assert http.get("/topics", headers=pub).get_json()[0]["events"] == 1


def test_a_malformed_idempotency_key_is_a_400_and_nothing_is_queued(http: FlaskClient, pub):
    event = {"type": "create", "url": "https://o.test/1"}
    response = http.post("/topics/orders", json=event, headers={**pub, "Idempotency-Key": "a b"})
    assert response.status_code == 400
    assert "Idempotency-Key" in response.get_json()["error"]
    assert http.get("/topics", headers=pub).get_json() == []


def test_a_null_key_is_a_400_naming_it_and_nothing_is_queued(http: FlaskClient, pub, sub):
    subscribe(http, sub, ["orders"])
    body = [EVENT, {**EVENT, "key": None}]
    response = http.post("/topics/orders", json=body, headers=pub)
    assert response.status_code == 400
    assert response.get_json() == {
        "error": "event 1: key: null is not allowed; leave it out to order by the url"
    }
    assert queued(http, sub) == 0
