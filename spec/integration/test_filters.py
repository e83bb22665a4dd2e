"""POST /filters/test from outside: a real `busbar web` answers which events a filter
matches, refuses a bad filter with a 400 naming the operator or path, answers a pattern
built for catastrophic backtracking at once, and holds the bounds its settings give."""

from __future__ import annotations

import time
from pathlib import Path

from spec.conftest import ROOT_KEY
from spec.integration.bus import bus
from spec.integration.subscriber import serving

ORDERS = [
    {"type": "create", "url": "https://o.test/1", "data": {"total": 150, "country": "FR"}},
    {"type": "create", "url": "https://o.test/2", "data": {"total": 80, "country": "FR"}},
    {"type": "update", "url": "https://o.test/3", "key": "c-9", "data": {"country": "DE"}},
    {"type": "delete", "url": "https://o.test/4"},
]


def test_a_client_tries_a_filter_on_events_before_subscribing(redis_url: str, tmp_path: Path):
    with bus(redis_url, tmp_path, workers=0, BUSBAR_FILTER_MAX_CONDITIONS="5") as b:
        b.client("shop")

        def tried(token: str, body: object) -> tuple[int, object]:
            answer = b.call("POST", "/filters/test", token, body)
            assert answer.headers["Content-Type"].startswith("application/json")
            return answer.status_code, answer.json()

        big = {"data.total": {"$gt": 100}, "data.country": {"$in": ["FR", "BE"]}}
        assert tried("shop", {"filter": big, "events": ORDERS}) == (
            200, {"matches": [True, False, False, False]},
        )  # fmt: skip
        either = {"$or": [{"key": {"$prefix": "c-"}}, {"data": {"$exist": False}}]}
        assert tried(ROOT_KEY, {"filter": either, "events": ORDERS}) == (
            200, {"matches": [False, False, True, True]},
        )  # fmt: skip
        assert tried("shop", {"filter": {}, "events": []}) == (200, {"matches": []})

        status, error = tried("shop", {"filter": {"data.total": {"$above": 1}}, "events": []})
        assert status == 400 and "filter.data.total.$above: no operator $above" in str(error)
        status, error = tried("shop", {"filter": {"price": 1}, "events": ORDERS})
        assert status == 400 and "filter.price: no field 'price'" in str(error)
        status, error = tried("shop", {"filter": {"url": {"$regex": "(a)\\1"}}, "events": []})
        assert status == 400 and "not a pattern RE2 takes" in str(error)
        many = {f"data.f{i}": i for i in range(6)}
        status, error = tried("shop", {"filter": many, "events": []})
        assert status == 400 and "at most 5 conditions (BUSBAR_FILTER_MAX_CONDITIONS)" in str(error)
        status, error = tried("shop", {"filter": {}, "events": [3]})
        assert status == 400 and "events[0] must be an event object" in str(error)
        status, error = tried("shop", {"events": ORDERS})
        assert status == 400 and "filter is required" in str(error)
        assert (
            b.call("POST", "/filters/test", "nobody", {"filter": {}, "events": []}).status_code
            == 401
        )

        evil = {
            "filter": {"data.s": {"$regex": "^(a+)+$"}},
            "events": [{"data": {"s": "a" * 10_000 + "!"}}],
        }
        started = time.perf_counter()
        assert tried("shop", evil) == (200, {"matches": [False]})
        assert time.perf_counter() - started < 0.5  # the HTTP round trip included


def order(i: int, total: float, country: str) -> dict:
    return {
        "type": "create",
        "url": f"https://o.test/{i}",
        "data": {"total": total, "country": country},
    }


def test_each_subscriber_gets_only_what_its_route_filters_match(redis_url: str, tmp_path: Path):
    """One bulk and one single publish to three subscribers: one filtered, one not, one
    whose filter picks a lane; then a filter changed and an unsubscribe, each holding at
    the very next publish; filtered events counted and never queued."""
    with serving() as big, serving() as everything, bus(redis_url, tmp_path) as b:
        b.client("pub"), b.client("big"), b.client("all"), b.client("lanes")
        b.subscribe("big", big.url, [{"topic": "orders", "filter": {"data.total": {"$gt": 100}}}],
                    max=10, timeout=0)  # fmt: skip
        b.subscribe("all", everything.url, ["orders"], max=10, timeout=0)
        french_first = [
            {"topic": "orders", "priority": 0, "filter": {"data.country": "FR"}},
            {"topic": "orders", "priority": 5, "filter": {"data.total": {"$gte": 50}}},
        ]
        b.subscribe("lanes", "http://127.0.0.1:9/nobody", french_first, max=10, timeout=0)
        assert b.call("POST", "/subscriber/pause", "lanes").status_code == 200

        totals = [(150, "FR"), (20, "DE"), (300, "DE"), (99.5, "FR"), (60, "DE"), (101, "BE")]
        b.publish("pub", "orders", [order(i, t, c) for i, (t, c) in enumerate(totals)])
        b.publish("pub", "orders", order(6, 5, "DE"))
        everything.wait_for(7)
        big.wait_for(3)
        time.sleep(0.5)
        assert [e["url"] for e in big.delivered] == [f"https://o.test/{i}" for i in (0, 2, 5)]
        assert b.subscription("big")["events"]["filtered"] == 4
        assert b.subscription("all")["events"]["filtered"] == 0
        lanes = {lane["lane"]: lane["events"] for lane in b.subscription("lanes")["lanes"]}
        assert lanes == {0: 2, 5: 3}  # FR on lane 0; the rest from 50 on lane 5; 2 kept out
        assert b.subscription("lanes")["events"] == {
            "sent": 0, "queued": 5, "oldest": b.subscription("lanes")["events"]["oldest"],
            "filtered": 2, "transformed_out": 0,
        }  # fmt: skip
        metrics = b.call("GET", "/metrics", ROOT_KEY).text
        assert "busbar_events_filtered_total 6.0" in metrics
        assert 'busbar_subscriber_events_filtered_total{subscriber="big"} 4.0' in metrics

        # a changed filter holds from the next publish on, in every web process
        b.subscribe("big", big.url, [{"topic": "orders", "filter": {"data.country": "DE"}}],
                    max=10, timeout=0)  # fmt: skip
        b.publish("pub", "orders", [order(7, 500, "FR"), order(8, 1, "DE")])
        big.wait_for(4)
        time.sleep(0.5)
        assert [e["url"] for e in big.delivered][3:] == ["https://o.test/8"]
        listed = b.subscription("big")["routes"]
        assert [r["filter"] for r in listed] == [{"data.country": "DE"}]

        # unsubscribed: nothing more, filter or not
        assert b.call("DELETE", "/subscriber/topics/orders", "big").status_code == 204
        b.publish("pub", "orders", order(9, 1, "DE"))
        everything.wait_for(10)
        time.sleep(0.5)
        assert len(big.delivered) == 4


def test_a_filter_on_a_coalescing_route_and_a_bad_one_refused(redis_url: str, tmp_path: Path):
    with bus(redis_url, tmp_path, workers=0, BUSBAR_FILTER_MAX_DEPTH="2") as b:
        b.client("pub"), b.client("stock")
        low = {"topic": "stock", "coalesce": True, "filter": {"data.level": {"$lt": 5}}}
        b.subscribe("stock", "http://127.0.0.1:9/nobody", [low], max=10, timeout=60_000)
        levels = [3, 10, 2]
        b.publish("pub", "stock", [{"type": "update", "url": "https://s.test/sku-1",
                                    "data": {"level": n}} for n in levels])  # fmt: skip
        events = b.subscription("stock")["events"]
        assert (events["queued"], events["filtered"]) == (1, 1)  # 2 replaced 3; 10 kept out

        deep = {"$not": {"$not": {"$not": {"type": "create"}}}}
        body = {"topics": [{"topic": "stock", "filter": deep}], "callback": "https://s.test/in"}
        refused = b.call("POST", "/subscription", "stock", body)
        assert refused.status_code == 400
        assert "topics[0].filter.$not.$not.$not: filters nest at most 2 deep" in refused.text
        assert b.subscription("stock")["routes"][0]["filter"] == low["filter"]  # unchanged
