"""Subscriptions over the API: create, replace, list, unsubscribe, delete."""

from __future__ import annotations

import pytest
import redis
from flask.testing import FlaskClient

from app.models.keys import Keys
from spec.app.web.conftest import ROOT, make_client, subscribe
from spec.view import counter

EVENT = {"type": "create", "url": "https://orders.test/o/1"}


def listing(http: FlaskClient, headers) -> list[dict]:
    response = http.get("/subscriptions", headers=headers)
    assert response.status_code == 200
    return response.get_json()


def test_subscribe_and_list_in_routemaster_shape(http: FlaskClient, sub):
    subscribe(http, sub, ["orders", {"topic": "users", "priority": 1, "ttl": 30}], uuid="u-1",
              timeout=250, max=20, max_attempts=5)  # fmt: skip
    (entry,) = listing(http, sub)
    assert entry["subscriber"] == "sub"
    assert entry["callback"] == "https://sub.test/in"
    assert (entry["uuid"], entry["timeout"], entry["max_events"]) == ("u-1", 250, 20)
    assert entry["topics"] == ["orders", "users"]
    assert entry["events"] == {
        "sent": 0,
        "queued": 0,
        "oldest": None,
        "filtered": 0,
        "transformed_out": 0,
    }
    assert entry["max_attempts"] == 5
    assert entry["routes"][1] == {
        "topic": "users", "priority": 1, "ttl": 30, "types": ["create", "update", "delete", "noop"],
        "coalesce": False, "filter": None, "transform": None,
    }  # fmt: skip


def test_aliases(http: FlaskClient, sub):
    body = {"topics": ["orders"], "callback": "https://sub.test/in"}
    assert http.post("/subscriber", json=body, headers=sub).status_code == 204
    assert http.get("/subscribers", headers=sub).get_json() == listing(http, sub)


def test_uuid_is_made_up_once_and_kept(http: FlaskClient, sub):
    subscribe(http, sub, ["orders"])
    made = listing(http, sub)[0]["uuid"]
    assert made
    subscribe(http, sub, ["users"])
    assert listing(http, sub)[0]["uuid"] == made
    subscribe(http, sub, ["users"], uuid="mine")
    assert listing(http, sub)[0]["uuid"] == "mine"


def test_reposting_replaces_the_routes(http: FlaskClient, pub, sub):
    subscribe(http, sub, ["orders", "users"])
    subscribe(http, sub, ["users"])
    assert listing(http, sub)[0]["topics"] == ["users"]
    http.post("/topics/orders", json=EVENT, headers=pub)
    assert listing(http, sub)[0]["events"]["queued"] == 0


def test_clients_see_only_their_own_subscription_and_root_sees_all(http: FlaskClient, sub):
    other = make_client(http, "other")
    subscribe(http, sub, ["orders"])
    subscribe(http, other, ["users"])
    assert [e["subscriber"] for e in listing(http, sub)] == ["sub"]
    assert [e["subscriber"] for e in listing(http, ROOT)] == ["other", "sub"]
    assert listing(http, make_client(http, "nobody")) == []


def test_queued_and_oldest_come_from_real_counters(http: FlaskClient, pub, sub):
    subscribe(
        http, sub, [{"topic": "orders"}, {"topic": "orders", "priority": 0, "types": ["delete"]}]
    )
    http.post("/topics/orders", json={**EVENT, "timestamp": 1}, headers=pub)
    http.post(
        "/topics/orders", json={"type": "delete", "url": "https://orders.test/o/1"}, headers=pub
    )
    events = listing(http, sub)[0]["events"]
    assert events["queued"] == 2
    assert isinstance(events["oldest"], int) and events["oldest"] > 1_600_000_000_000


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"topics": "orders", "callback": "https://s.test/in"}, "topics must be a list"),
        ({"topics": ["orders"], "callback": "https://s.test/in", "max": 0}, "max must be"),
        ({"topics": ["BAD"], "callback": "https://s.test/in"}, "topics[0] must match"),
        ({"topics": ["orders"], "callback": "https://s.test/in", "x": 1}, "unknown key(s)"),
    ],
)
def test_bad_subscription_changes_nothing(http: FlaskClient, sub, body, message):
    subscribe(http, sub, ["users"])
    response = http.post("/subscription", json=body, headers=sub)
    assert response.status_code == 400
    assert message in response.get_json()["error"]
    assert listing(http, sub)[0]["topics"] == ["users"]


def test_root_cannot_subscribe(http: FlaskClient):
    body = {"topics": ["orders"], "callback": "https://s.test/in"}
    assert http.post("/subscription", json=body, headers=ROOT).status_code == 403


def test_unsubscribe_one_topic(http: FlaskClient, pub, sub):
    subscribe(http, sub, ["orders", "users"])
    assert http.delete("/subscriber/topics/orders", headers=sub).status_code == 204
    assert listing(http, sub)[0]["topics"] == ["users"]
    http.post("/topics/orders", json=EVENT, headers=pub)
    assert listing(http, sub)[0]["events"]["queued"] == 0
    assert http.delete("/subscriber/topics/orders", headers=sub).status_code == 404
    assert http.delete("/subscriber/topics/nothing", headers=sub).status_code == 404
    assert http.delete("/subscriber/topics/users", headers=sub).status_code == 204
    assert listing(http, sub)[0]["topics"] == []  # still a subscriber, with no topic


def test_delete_subscriber_drops_and_counts_queued_events(
    http: FlaskClient, pub, sub, redis_client: redis.Redis, keys: Keys
):
    subscribe(http, sub, ["orders"], max=2)
    for i in range(5):
        http.post("/topics/orders", json={**EVENT, "url": f"https://o.test/{i}"}, headers=pub)
    assert http.delete("/subscriber", headers=sub).status_code == 204
    assert listing(http, sub) == []
    assert http.delete("/subscriber", headers=sub).status_code == 404
    assert counter(redis_client, keys, "events.removed") == 5
    leftovers = [k for k in redis_client.keys("*") if b"{sub:sub}" in k and not k.endswith(b":seq")]
    assert leftovers == []
    assert redis_client.scard(keys.home("sub").jobs_index("main")) == 0
    for lane in range(11):
        assert redis_client.zcard(keys.home("sub").batch_index(lane)) == 0


def test_deleting_the_token_deletes_the_subscriber(http: FlaskClient, pub, sub, redis_client, keys):
    subscribe(http, sub, ["orders"])
    http.post("/topics/orders", json=EVENT, headers=pub)
    assert http.delete("/api_tokens/sub", headers=ROOT).status_code == 204
    assert listing(http, ROOT) == []
    assert redis_client.hlen(keys.topic_subscribers("orders")) == 0


def test_pulse_scaling(http: FlaskClient, sub):
    assert http.get("/pulse/scaling", headers=sub).status_code == 204
    assert http.get("/pulse/scaling").status_code == 401


@pytest.mark.parametrize(
    ("field", "error"),
    [
        ("concurrency", "concurrency: null is not allowed; leave it out for the default"),
        ("headers", "headers: null is not allowed; leave it out to keep the subscription's own, "
                    "or give {} to remove them"),
    ],
)  # fmt: skip
def test_a_null_busbar_does_not_take_is_a_400_naming_the_field(
    http: FlaskClient, sub, field: str, error: str
):
    first = {"topics": ["users"], "callback": "https://s.test/in", "concurrency": 2,
             "headers": {"X-Shop": "a"}}  # fmt: skip
    assert http.post("/subscription", json=first, headers=sub).status_code == 204
    body = {"topics": ["orders"], "callback": "https://s.test/in", field: None}
    response = http.post("/subscription", json=body, headers=sub)
    assert (response.status_code, response.get_json()) == (400, {"error": error})
    (entry,) = listing(http, sub)
    assert (entry["topics"], entry["concurrency"]) == (["users"], 2)


def test_a_listed_route_and_routemasters_nulls_post_back(http: FlaskClient, sub):
    subscribe(http, sub, [{"topic": "orders", "types": ["create"]}], max_attempts=3)
    (entry,) = listing(http, sub)
    routes = [*entry["routes"], {"topic": "users", "priority": None, "ttl": None}]
    subscribe(http, sub, routes, uuid=None, timeout=None, max=None, max_attempts=None)
    (entry,) = listing(http, sub)
    assert entry["topics"] == ["orders", "users"]
    assert (entry["timeout"], entry["max_events"], entry["max_attempts"]) == (500, 100, None)
