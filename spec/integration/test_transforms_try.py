"""POST /transforms/test from outside: a real `busbar web` runs a transform on an event
as a subscriber would receive it and answers the output, `dropped` for nothing, or why
the evaluation failed with the bound it hit, and the time each took; a bad expression is
a 400 naming where it is wrong; the bounds are its settings'.

On one Redis (`layout_free`): the endpoint evaluates an expression and stores
nothing; transforms are delivered on a Redis Cluster in test_transforms.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from busbar_client import BadRequest, Busbar

from spec.conftest import ROOT_KEY
from spec.integration.bus import bus

pytestmark = pytest.mark.layout_free

ORDER = {
    "topic": "orders", "type": "create", "url": "https://shop.test/orders/1", "key": None,
    "t": 1_795_651_200_000,
    "data": {"id": 1, "total": 12.5, "currency": "EUR",
             "customer": {"name": "Ann", "email": "ann@example.test"},
             "items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}]},
}  # fmt: skip
PICK = ('{"order": data.id, "amount": data.total, "currency": data.currency, '
        '"who": data.customer.name, "lines": $count(data.items)}')  # fmt: skip
SLACK = ('{"text": "Order " & data.id & " by " & data.customer.name & ": " '
         '& $string(data.total) & " " & data.currency}')  # fmt: skip


def test_a_client_tries_a_transform_before_subscribing(redis_url: str, tmp_path: Path):
    with bus(redis_url, tmp_path, workers=0, BUSBAR_TRANSFORM_TIME_MS="200",
             BUSBAR_TRANSFORM_MAX_BYTES="300") as b:  # fmt: skip
        b.client("shop")

        def tried(token: str, transform: object, event: object = ORDER) -> tuple[int, dict]:
            answer = b.call("POST", "/transforms/test", token,
                            {"transform": transform, "event": event})  # fmt: skip
            assert answer.headers["Content-Type"].startswith("application/json")
            return answer.status_code, answer.json()

        status, done = tried("shop", PICK)
        assert status == 200 and done["dropped"] is False and done["took_ms"] >= 0
        assert done["output"] == {"order": 1, "amount": 12.5, "currency": "EUR", "who": "Ann",
                                  "lines": 2}  # fmt: skip
        status, done = tried(ROOT_KEY, SLACK)
        assert (status, done["output"]) == (200, {"text": "Order 1 by Ann: 12.5 EUR"})
        status, done = tried("shop", 'type = "delete" ? data : null')  # drops the others
        assert (status, done["output"], done["dropped"]) == (200, None, True)

        status, done = tried("shop", "($f := function($n){ $f($n + 1) }; $f(0))")
        assert status == 200 and done["failed"]["bound"] == "time", done
        assert done["failed"]["reason"] == "transform_failed" and 200 <= done["took_ms"] < 1000
        status, done = tried("shop", '($f := function($s){ $f($s & $s) }; $f("x"))')
        assert (status, done["failed"]["bound"]) == (200, "size"), done
        status, done = tried("shop", '$eval("data")')
        assert (status, done["failed"]["bound"]) == (200, "error")
        assert "$eval is not available" in done["failed"]["message"]
        started = time.monotonic()  # a pattern built for backtracking: RE2 answers at once
        evil = {**ORDER, "data": {"s": "a" * 10_000 + "c"}}
        status, done = tried("shop", "$match(data.s, /(a+)+b/)", evil)
        assert (status, done["dropped"]) == (200, True) and time.monotonic() - started < 2

        status, error = tried("shop", '{"order": data.id')
        assert status == 400 and "transform is not valid JSONata" in str(error)
        assert "(at character 17)" in str(error)
        status, error = tried("shop", "x" * 301)
        assert status == 400 and "over 300 bytes (BUSBAR_TRANSFORM_MAX_BYTES)" in str(error)
        status, error = tried("shop", "$match(data.s, /(?=a)/)")
        assert status == 400 and "a pattern busbar cannot run" in str(error)
        status, error = tried("shop", PICK, [ORDER])
        assert status == 400 and "event must be an event object" in str(error)
        answer = b.call("POST", "/transforms/test", "shop", {"event": ORDER})
        assert answer.status_code == 400 and "transform is required" in answer.text
        answer = b.call("POST", "/transforms/test", "shop", {"transform": PICK, "x": 1})
        assert answer.status_code == 400 and "unknown field 'x'" in answer.text
        answer = b.call("POST", "/transforms/test", "nobody", {"transform": PICK, "event": ORDER})
        assert answer.status_code == 401

        # the same from the Python client
        client = Busbar(b.base, "shop", retries=0)
        tried_by_client = client.try_transform(SLACK, ORDER)
        assert tried_by_client.output == {"text": "Order 1 by Ann: 12.5 EUR"}
        assert not tried_by_client.dropped and tried_by_client.failed is None
        assert client.try_transform("data.nothing", ORDER).dropped is True
        assert client.try_transform('$eval("1")', ORDER).failed["bound"] == "error"  # type: ignore[index]
        with pytest.raises(BadRequest, match=r"at character 17"):
            client.try_transform('{"order": data.id', ORDER)
