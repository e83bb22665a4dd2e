"""Event schemas from outside: a real `busbar web` (two gunicorn workers, each with its
own cache of the topic's rules) and a worker, on both layouts. The topic's publisher sets
a schema per event type; a single or bulk publish that breaks one is a 400 naming the
event, the pointer in its data and the rule, and a refused bulk queues nothing; a new
version, a deprecation and a removal hold from the next publish, whichever web process
takes it; nobody but the publisher (or root) changes them; unsafe schemas are refused."""

from __future__ import annotations

import time
from pathlib import Path

from spec.conftest import ROOT_KEY
from spec.integration.bus import bus
from spec.integration.subscriber import serving

ORDER = {
    "type": "object",
    "properties": {
        "total": {"type": "number", "minimum": 0},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]+$"}},
                "required": ["sku"],
            },
        },
    },
    "required": ["total"],
}


def order(i: int, total: object = 10, sku: str = "ABC-1", **more: object) -> dict:
    data = {"total": total, "lines": [{"sku": "ABC-0"}, {"sku": sku}], **more}
    return {"type": "create", "url": f"https://o.test/{i}", "data": data}


def test_a_publish_that_breaks_its_schema_is_refused_where_it_breaks(
    redis_url: str, tmp_path: Path
):
    with serving() as sub, bus(redis_url, tmp_path, BUSBAR_WEB_WORKERS="2") as b:
        b.client("pub"), b.client("other"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=20, timeout=0)

        def refused(events: object) -> str:
            answer = b.call("POST", "/topics/orders", "pub", events)
            assert answer.status_code == 400, answer.text
            return answer.json()["error"]

        put = b.call("PUT", "/topics/orders/schemas/create", "pub", ORDER)
        assert put.status_code == 200, put.text
        assert (put.json()["version"], put.json()["changed"]) == (1, True)
        (listed,) = b.call("GET", "/topics", ROOT_KEY).json()
        assert listed["publisher_name"] == "pub"  # the first PUT claimed the topic
        assert (
            b.call("PUT", "/topics/orders/schemas/create", "pub", ORDER).json()["changed"] is False
        )
        assert b.call("PUT", "/topics/orders/schemas/create", "other", ORDER).status_code == 403

        assert refused(order(0, total=-5)) == (
            "event 0 breaks the create schema of topic orders (version 1) at data/total: "
            "-5 is less than the minimum of 0 (rule /properties/total/minimum)"
        )
        error = refused([order(1), order(2), order(3, sku="abc")])
        assert error.startswith("event 2 breaks the create schema of topic orders (version 1) "
                                "at data/lines/1/sku: ")  # fmt: skip
        assert "(rule /properties/lines/items/properties/sku/pattern)" in error
        assert "event 0 " in refused([order(4, total="ten")])  # a type mismatch
        assert '"total" is a required property' in refused(
            {"type": "create", "url": "https://o.test/5", "data": {}}
        )
        b.publish("pub", "orders", [order(6), {"type": "update", "url": "https://o.test/6"}])
        sub.wait_for(2)

        # a new version holds at the very next publish, whichever web process takes it
        stricter = {**ORDER, "required": ["total", "currency"]}
        assert (
            b.call("PUT", "/topics/orders/schemas/create", "pub", stricter).json()["version"] == 2
        )
        for i in range(4):
            assert "(version 2) at data: " in refused(order(10 + i)), i
            b.publish("pub", "orders", order(20 + i, currency="EUR"))
        sub.wait_for(6)
        time.sleep(0.5)
        assert [e["url"].rsplit("/", 1)[1] for e in sub.delivered] == [
            "6",
            "6",
            "20",
            "21",
            "22",
            "23",
        ]  # fmt: skip: nothing of a refused bulk, nothing refused

        # everyone reads them; a version is deprecated, then the type's schema removed
        (summary,) = b.call("GET", "/topics/orders/schemas", "sub").json()
        assert (summary["type"], summary["version"], summary["deprecated"]) == ("create", 2, False)
        assert [v["version"] for v in summary["versions"]] == [1, 2]
        first = b.call("GET", "/topics/orders/schemas/create/versions/1", "sub").json()
        assert (first["schema"], first["current"]) == (ORDER, 2)
        mark = {"deprecated": True}
        assert (
            b.call("PATCH", "/topics/orders/schemas/create/versions/2", "sub", mark).status_code
            == 403
        )
        marked = b.call("PATCH", "/topics/orders/schemas/create/versions/2", "pub", mark).json()
        assert (marked["version"], marked["deprecated"]) == (2, True)
        assert b.call("GET", "/topics/orders/schemas", "other").json()[0]["deprecated"] is True
        assert "(version 2)" in refused(order(30))  # a deprecated version still checks
        assert b.call("DELETE", "/topics/orders/schemas/create", "other").status_code == 403
        assert b.call("DELETE", "/topics/orders/schemas/create", "pub").status_code == 204
        for i in range(4):
            b.publish("pub", "orders", order(40 + i, total=-1))
        assert b.call("GET", "/topics/orders/schemas/create", "pub").status_code == 404
        assert b.call("GET", "/topics/orders/schemas", "pub").json() == []
        again = b.call("PUT", "/topics/orders/schemas/create", ROOT_KEY, ORDER).json()
        assert again["version"] == 3  # numbers are not reused
        assert b.call("DELETE", "/topics/orders", "pub").status_code == 204
        assert b.call("GET", "/topics/orders/schemas", "pub").json() == []  # gone with it


def test_unsafe_and_invalid_schemas_are_refused(redis_url: str, tmp_path: Path):
    env = {"BUSBAR_SCHEMA_MAX_BYTES": "512", "BUSBAR_SCHEMA_MAX_DEPTH": "6",
           "BUSBAR_MAX_EVENT_DATA": "20000"}  # fmt: skip
    with bus(redis_url, tmp_path, workers=0, **env) as b:
        b.client("pub")

        def put(schema: object, type_: str = "create", topic: str = "orders") -> tuple[int, str]:
            answer = b.call("PUT", f"/topics/{topic}/schemas/{type_}", "pub", schema)
            return answer.status_code, answer.json().get("error", "") if answer.text else ""

        assert put({"$ref": "https://example.com/order.json"}) == (
            400, "/$ref: only a local $ref (one that starts with '#') is taken; busbar "
            "fetches no schema from anywhere",
        )  # fmt: skip
        status, error = put({"properties": {"a": {"$dynamicRef": "http://x/#meta"}}})
        assert status == 400 and "/properties/a/$dynamicRef: only a local" in error
        status, error = put({"description": "x" * 600})
        assert status == 400 and "at most 512 (BUSBAR_SCHEMA_MAX_BYTES)" in error
        deep: dict = {"type": "string"}
        for _ in range(4):
            deep = {"properties": {"a": deep}}
        status, error = put(deep)
        assert status == 400 and "nests deeper than 6" in error
        status, error = put({"properties": {"total": {"type": "nonsense"}}})
        assert (status, error) == (400, 'schema invalid at /properties/total/type: "nonsense" is '
                                   'not one of "array", "boolean", "integer", "null", "number", '
                                   '"object", "string"')  # fmt: skip
        status, error = put({"pattern": "(a)\\1"})  # a backreference: no linear engine takes it
        assert status == 400 and error.startswith(
            'schema invalid at /pattern: "(a)\\\\1" is not a pattern busbar can run: invalid '
            "escape sequence: \\1 (a backreference: "
        )
        status, error = put({"$schema": "http://json-schema.org/draft-07/schema#"})
        assert status == 400 and "only draft 2020-12" in error
        status, error = put([1])
        assert status == 400 and "an object (or true/false)" in error
        status, error = put({}, type_="upsert")
        assert status == 400 and "type must be one of create, update, delete, noop" in error
        status, error = put({}, topic="busbar_operations")
        assert status == 403 and "the bus's own topic" in error
        assert b.call("GET", "/topics/orders/schemas", "pub").json() == []  # nothing stored

        # a pattern built for catastrophic backtracking runs in linear time
        assert put({"properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}})[0] == 200
        started = time.monotonic()
        evil = {"type": "create", "url": "https://o.test/1", "data": {"s": "a" * 10_000 + "!"}}
        answer = b.call("POST", "/topics/orders", "pub", evil)
        assert answer.status_code == 400 and "at data/s: " in answer.json()["error"]
        assert time.monotonic() - started < 1.0
