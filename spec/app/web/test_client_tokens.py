"""One name, one client (issue 53, defect 5): POST /api_tokens with a name in use is a
409 naming it, unless it asks to add a token to that client; then both tokens are one
client (one subscription, one listing row, one name on its deliveries), and deleting
one of them leaves the client working with the other."""

from __future__ import annotations

import dataclasses
import threading

import redis
from flask import Flask
from flask.testing import FlaskClient

from app.models.keys import Keys
from app.web import create_app
from config.settings import Settings
from spec.app.web.conftest import ROOT, basic, subscribe

ORDER = {"type": "create", "url": "https://shop.test/orders/1"}


def post(http: FlaskClient, body: dict) -> tuple[int, dict]:
    response = http.post("/api_tokens", json=body, headers=ROOT)
    return response.status_code, response.get_json()


def test_a_name_in_use_is_a_409_naming_it_and_nothing_changes(http: FlaskClient):
    assert post(http, {"name": "shop"})[0] == 201
    status, body = post(http, {"name": "shop"})
    assert status == 409
    assert "a client named shop exists" in body["error"] and '"add": true' in body["error"]
    status, body = post(http, {"name": "shop", "token": "shop-2"})
    assert status == 409 and "shop" in body["error"] and "shop-2" not in body["error"]
    assert [t["name"] for t in http.get("/api_tokens", headers=ROOT).get_json()] == ["shop"]
    assert http.get("/pulse", headers=basic("shop-2")).status_code == 401
    # the same token again with its name is still the idempotent re-post it was
    assert post(http, {"name": "billing", "token": "billing-1"})[0] == 201
    assert post(http, {"name": "billing", "token": "billing-1"})[0] == 201


def test_concurrent_creations_of_one_name_make_one_client(app: Flask):
    answers: list[int] = []
    start = threading.Barrier(8)

    def create(n: int) -> None:
        http = app.test_client()
        start.wait()
        answers.append(post(http, {"name": "shop", "token": f"shop-{n}"})[0])

    threads = [threading.Thread(target=create, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [201] + [409] * 7
    assert len(app.test_client().get("/api_tokens", headers=ROOT).get_json()) == 1


def test_an_added_token_is_the_same_client(http: FlaskClient):
    assert post(http, {"name": "shop", "token": "shop-1"})[0] == 201
    status, added = post(http, {"name": "shop", "token": "shop-2", "add": True})
    assert status == 201 and added == {"name": "shop", "token": "shop-2", "operator": False}
    assert post(http, {"name": "shop", "token": "shop-2", "add": True})[0] == 201  # a retry
    one, two = basic("shop-1"), basic("shop-2")
    subscribe(http, one, ["orders"], max=5)
    (mine,) = http.get("/subscriptions", headers=two).get_json()
    assert mine["name"] == "shop" and mine["callback"] == "https://sub.test/in"
    assert mine["max_events"] == 5 and mine["subscriber"] == "shop-2"  # found by its token
    subscribe(http, two, ["orders", "refunds"])  # replaces the one subscription
    rows = http.get("/subscriptions", headers=ROOT).get_json()
    assert [(r["subscriber"], r["name"], r["topics"]) for r in rows] == [
        ("shop-1", "shop", ["orders", "refunds"])
    ]
    # the topic shop-1 claimed is shop's: shop-2 publishes to it, and sees it as its own
    assert http.post("/topics/orders", json=ORDER, headers=one).status_code == 204
    assert http.post("/topics/orders", json=ORDER, headers=two).status_code == 204
    (topic,) = [t for t in http.get("/topics", headers=two).get_json() if t["name"] == "orders"]
    assert topic["publisher"] == "shop-2" and topic["publisher_name"] == "shop"
    (row,) = http.get("/subscriptions", headers=one).get_json()
    assert row["events"]["queued"] == 2  # both publishes, queued for the one subscriber
    listed = http.get("/api_tokens", headers=ROOT).get_json()
    assert [(t["name"], t["token"]) for t in listed] == [("shop", "shop-1"), ("shop", "shop-2")]


def test_adding_refuses_what_it_cannot_do_and_says_why(http: FlaskClient):
    status, body = post(http, {"name": "shop", "add": True})
    assert status == 404 and body["error"] == "no client named shop to add a token to"
    assert post(http, {"name": "shop", "token": "shop-1"})[0] == 201
    assert post(http, {"name": "billing", "token": "billing-1"})[0] == 201
    status, body = post(http, {"name": "shop", "token": "billing-1", "add": True})
    assert status == 409 and body["error"] == "token already belongs to another client"
    status, body = post(http, {"name": "shop", "add": "yes"})
    assert status == 400 and body["error"] == "add must be true or false"
    assert http.get("/pulse", headers=basic("billing-1")).status_code == 204


def test_the_operator_mark_is_the_clients_whichever_token_sets_it(http: FlaskClient):
    assert post(http, {"name": "noc", "token": "noc-1"})[0] == 201
    status, body = post(http, {"name": "noc", "token": "noc-2", "add": True, "operator": True})
    assert status == 201 and body["operator"] is True
    listed = http.get("/api_tokens", headers=ROOT).get_json()
    assert [t["operator"] for t in listed] == [True, True]
    subscribe(http, basic("noc-1"), ["busbar_operations"])


def test_deleting_one_of_two_tokens_leaves_the_client_working_with_the_other(
    http: FlaskClient,
):
    assert post(http, {"name": "shop", "token": "shop-1"})[0] == 201
    assert post(http, {"name": "shop", "token": "shop-2", "add": True})[0] == 201
    one, two = basic("shop-1"), basic("shop-2")
    subscribe(http, one, ["orders"])
    assert http.post("/topics/orders", json=ORDER, headers=one).status_code == 204
    assert http.delete("/api_tokens/shop-1", headers=ROOT).status_code == 204
    assert http.get("/pulse", headers=one).status_code == 401
    assert http.post("/topics/orders", json=ORDER, headers=one).status_code == 401
    (row,) = http.get("/subscriptions", headers=two).get_json()
    assert row["events"]["queued"] == 1 and row["topics"] == ["orders"]
    assert http.post("/topics/orders", json=ORDER, headers=two).status_code == 204
    assert http.get("/api_tokens", headers=ROOT).get_json() == [
        {"name": "shop", "token": "shop-2", "operator": False}
    ]
    assert http.delete("/api_tokens/shop-1", headers=ROOT).status_code == 204  # again: no-op
    assert http.get("/pulse", headers=two).status_code == 204
    status, body = post(http, {"name": "shop", "token": "shop-1", "add": True})
    assert status == 409 and "deleted" in body["error"]  # a deleted token stays deleted
    # its last token goes: the client, its subscription and its name go with it
    assert http.delete("/api_tokens/shop-2", headers=ROOT).status_code == 204
    assert http.get("/pulse", headers=two).status_code == 401
    assert http.get("/subscriptions", headers=ROOT).get_json() == []
    assert http.get("/api_tokens", headers=ROOT).status_code == 204
    assert post(http, {"name": "shop", "token": "shop-3"})[0] == 201


def test_deleting_an_added_token_keeps_the_first(http: FlaskClient):
    assert post(http, {"name": "shop", "token": "shop-1"})[0] == 201
    assert post(http, {"name": "shop", "token": "shop-2", "add": True})[0] == 201
    subscribe(http, basic("shop-2"), ["orders"])
    assert http.delete("/api_tokens/shop-2", headers=ROOT).status_code == 204
    assert http.get("/pulse", headers=basic("shop-2")).status_code == 401
    (row,) = http.get("/subscriptions", headers=basic("shop-1")).get_json()
    assert row["topics"] == ["orders"]
    # by name, the client goes with every token it has
    assert post(http, {"name": "shop", "token": "shop-3", "add": True})[0] == 201
    assert http.delete("/api_tokens/by_name/shop", headers=ROOT).status_code == 204
    assert http.get("/api_tokens", headers=ROOT).status_code == 204
    assert http.get("/pulse", headers=basic("shop-3")).status_code == 401


def test_an_added_token_spends_its_clients_publish_rate(
    redis_client: redis.Redis, keys: Keys, settings: Settings
):
    limited = dataclasses.replace(settings, publish_rate=1, publish_burst=2, max_publish_events=2)
    http = create_app(limited, redis_client).test_client()
    assert post(http, {"name": "shop", "token": "shop-1"})[0] == 201
    assert post(http, {"name": "shop", "token": "shop-2", "add": True})[0] == 201
    two = [ORDER, {**ORDER, "type": "update"}]
    assert http.post("/topics/orders", json=two, headers=basic("shop-1")).status_code == 204
    refused = http.post("/topics/orders", json=ORDER, headers=basic("shop-2"))
    assert refused.status_code == 429  # one bucket for the client, not one a token
    assert not redis_client.exists(keys.catalog.rate("shop-2"))


def seed_shared(client: redis.Redis, keys: Keys) -> None:
    """Two clients named shop, written as the code before names were one client's wrote
    them (HSETNX of each token, nothing else)."""
    client.hsetnx(keys.tokens, "shop-old", "shop")
    client.hsetnx(keys.tokens, "shop-new", "shop")


def test_a_name_shared_from_before_stays_in_use_until_its_last_client_goes(
    http: FlaskClient, redis_client: redis.Redis, keys: Keys
):
    seed_shared(redis_client, keys)
    assert post(http, {"name": "shop"})[0] == 409
    status, body = post(http, {"name": "shop", "add": True})
    assert status == 409 and "2 clients are named shop" in body["error"]
    assert "busbar clients rename" in body["error"]
    assert http.delete("/api_tokens/by_name/shop", headers=ROOT).status_code == 409
    assert http.delete("/api_tokens/shop-old", headers=ROOT).status_code == 204
    assert post(http, {"name": "shop"})[0] == 409  # shop-new still carries it
    assert post(http, {"name": "shop", "token": "shop-2", "add": True})[0] == 201
    assert http.get("/pulse", headers=basic("shop-2")).status_code == 204
    assert http.delete("/api_tokens/by_name/shop", headers=ROOT).status_code == 204
    assert post(http, {"name": "shop", "token": "shop-3"})[0] == 201
