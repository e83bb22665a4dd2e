"""/subscriber/deadletters: list, replay in original order and lanes, clear."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from app.models.deadletters import DeadLetters
from spec.app.delivery.delivery_bench import Bench
from spec.app.web.conftest import ROOT, subscribe
from spec.integration.subscriber import Subscriber, serving


@pytest.fixture
def bench(redis_client, keys, scripts) -> Bench:
    return Bench(redis_client, keys, scripts, max_backoff_ms=1)


def test_dead_letters_listed_replayed_and_cleared(http: FlaskClient, pub, sub, bench: Bench):
    with serving(Subscriber(responder=lambda _: (502, 0.0))) as failing:
        routes = [{"topic": "orders", "priority": 2, "types": ["delete"]}, {"topic": "orders"}]
        subscribe(http, sub, routes, max=2, timeout=0, max_attempts=1)
        bench.client.hset(bench.keys.subscriber("sub"), "callback", failing.url)
        events = [{"type": t, "url": f"https://o.test/{i}"} for i, t in
                  enumerate(["create", "delete", "create", "delete", "create"])]  # fmt: skip
        assert http.post("/topics/orders", json=events, headers=pub).status_code == 204
        for _ in range(3):
            bench.clock.advance(5)
            assert bench.run().kind == "failed"
    response = http.get("/subscriber/deadletters", headers=sub)
    assert response.status_code == 200
    dead = response.get_json()
    assert [(d["url"], d["type"]) for d in dead] == [
        ("https://o.test/1", "delete"),
        ("https://o.test/3", "delete"),
        ("https://o.test/0", "create"),
        ("https://o.test/2", "create"),
        ("https://o.test/4", "create"),
    ]
    assert {(d["attempts"], d["last_status"]) for d in dead} == {(1, "502")}
    assert all(isinstance(d["failed_at"], int) and d["topic"] == "orders" for d in dead)

    with serving() as ok:
        bench.client.hset(
            bench.keys.subscriber("sub"), mapping={"callback": ok.url, "next_attempt_at": 0}
        )
        replay = http.post("/subscriber/deadletters/replay", headers=sub)
        assert replay.status_code == 202
        assert replay.get_json() == {"replayed": 5}
        assert http.get("/subscriber/deadletters", headers=sub).get_json() == []
        for _ in range(3):
            assert bench.run().kind == "delivered"
        batches = [[(e["url"], e["type"]) for e in r.events] for r in ok.received]
    assert batches == [
        [("https://o.test/1", "delete"), ("https://o.test/3", "delete")],  # lane 2 first
        [("https://o.test/0", "create"), ("https://o.test/2", "create")],
        [("https://o.test/4", "create")],
    ]
    assert http.delete("/subscriber/deadletters", headers=sub).status_code == 204


def test_clear_drops_them(http: FlaskClient, sub, bench: Bench):
    subscribe(http, sub, ["orders"])
    bench.client.rpush(bench.keys.deadletters("sub"), b"1|2|10|500|0|x")
    assert http.delete("/subscriber/deadletters", headers=sub).status_code == 204
    assert not bench.client.exists(bench.keys.deadletters("sub"))


def test_without_a_subscription_it_is_404(http: FlaskClient, sub):
    assert http.get("/subscriber/deadletters", headers=sub).status_code == 404
    assert http.post("/subscriber/deadletters/replay", headers=sub).status_code == 404
    assert http.delete("/subscriber/deadletters", headers=sub).status_code == 404


def test_only_clients_own_dead_letters(http: FlaskClient):
    for method in ("GET", "DELETE"):
        assert http.open("/subscriber/deadletters", method=method, headers=ROOT).status_code == 403
    assert http.post("/subscriber/deadletters/replay").status_code == 401


def test_a_long_replay_goes_in_chunks_in_the_original_order(redis_client, keys, scripts):
    bench = Bench(redis_client, keys, scripts, max_backoff_ms=1)
    with serving(Subscriber(responder=lambda _: (500, 0.0))) as failing:
        bench.subscribe(failing.url, ["orders"], max=7, timeout=0, max_attempts=1)
        bench.publish(7)
        assert bench.run().kind == "failed"
    letters = DeadLetters(redis_client, keys, scripts, chunk=3)
    calls = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert letters.replay("sub", bench.clock()) == 7
    assert redis_client.info("commandstats")["cmdstat_evalsha"]["calls"] - calls >= 3
    assert letters.list("sub") == []
    with serving() as ok:
        bench.client.hset(keys.subscriber("sub"), mapping={"callback": ok.url})
        bench.clock.advance(10)
        assert bench.run().kind == "delivered"
        assert [e["url"] for e in ok.received[0].events] == [
            f"https://o.test/{i}" for i in range(7)
        ]
