"""POST /filters/test from outside: a real `busbar web` answers which events a filter
matches, refuses a bad filter with a 400 naming the operator or path, answers a pattern
built for catastrophic backtracking at once, and holds the bounds its settings give."""

from __future__ import annotations

import time
from pathlib import Path

from spec.conftest import ROOT_KEY
from spec.integration.bus import bus

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
