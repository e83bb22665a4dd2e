"""Operational events, from outside: real web and worker processes, a real subscriber
that fails and mends, and an operator client subscribed to `busbar_operations` that
receives what happened to the bus, signed, in order, naming clients, never tokens."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from standardwebhooks import Webhook

from spec.conftest import ROOT_KEY
from spec.integration.bus import Bus, bus, events, fast_scrub
from spec.integration.processes import wait_until
from spec.integration.subscriber import Received, Subscriber, serving

TOPIC = "busbar_operations"


def operator(b: Bus, name: str, callback: str) -> str:
    """A client root marks as an operator, subscribed to the bus's topic; its secret."""
    made = b.call("POST", "/api_tokens", ROOT_KEY, {"name": name, "token": name, "operator": True})
    assert made.status_code == 201 and made.json()["operator"] is True, made.text
    b.subscribe(name, callback, [TOPIC], max=100, timeout=0)
    secret: str = b.call("GET", "/subscriber/secret", name).json()["secret"]
    return secret


def told(sub: Subscriber, subscriber: str) -> list[dict]:
    return [e for e in sub.delivered if e["data"].get("subscriber") == subscriber]


def test_an_operator_is_told_what_happens_to_a_subscriber(redis_url: str, tmp_path: Path) -> None:
    failing = threading.Event()
    failing.set()

    def answer(_: Received) -> tuple[int, float]:
        return (500 if failing.is_set() else 200), 0.0

    ledger, ops = Subscriber(responder=answer), Subscriber()
    env = {
        "BUSBAR_PUBLIC_URL": "https://ops.test",
        "BUSBAR_CIRCUIT_FAILURES": "2",
        "BUSBAR_CIRCUIT_OUTAGE_MS": "0",
        "BUSBAR_RETRY_FIRST_MS": "100",
        "BUSBAR_CIRCUIT_PROBE_MS": "500",
    }
    with serving(ledger), serving(ops), bus(redis_url, tmp_path, **env) as b:
        secret = operator(b, "noc", ops.url)
        b.client("pub")
        b.call("POST", "/api_tokens", ROOT_KEY, {"name": "ledger", "token": "tok-ledger-1"})
        b.subscribe("tok-ledger-1", ledger.url, ["orders"], max=1, timeout=0, max_attempts=1)
        b.publish("pub", "orders", events(1))
        wait_until(lambda: len(told(ops, "ledger")) == 1, 30, "the first dead letters")
        b.publish("pub", "orders", events(1, start=1))  # the second failure in a row
        wait_until(lambda: len(told(ops, "ledger")) == 3, 30, "the circuit to open")
        failing.clear()
        b.publish("pub", "orders", events(1, start=2))  # the probe goes through
        wait_until(lambda: len(told(ops, "ledger")) == 4, 30, "the circuit to close")
        assert b.call("POST", "/subscribers/ledger/pause", ROOT_KEY).status_code == 200
        assert b.call("POST", "/subscriber/resume", "tok-ledger-1").status_code == 200
        wait_until(lambda: len(told(ops, "ledger")) == 6, 30, "the pause and the resume")

        got = told(ops, "ledger")
        assert [e["data"]["kind"] for e in got] == [
            "subscriber.dead_lettered",
            "subscriber.circuit_opened",
            "subscriber.dead_lettered",
            "subscriber.circuit_closed",
            "subscriber.paused",
            "subscriber.resumed",
        ]
        dead, opened, _, closed, paused, resumed = (e["data"] for e in got)
        assert dead["events"] == 1 and dead["attempts"] == 1 and dead["last_status"] == "500"
        assert opened["failures"] == 2 and opened["last_status"] == "500"
        assert closed["open_ms"] >= 0
        assert paused == {"kind": "subscriber.paused", "subscriber": "ledger",
                          "by": "root", "automatic": False}  # fmt: skip
        assert resumed["by"] == "ledger" and resumed["paused_ms"] >= 0
        for event in got:
            assert event["topic"] == TOPIC and event["type"] == "update"
            assert event["url"] == "https://ops.test/subscribers/ledger"
        times = [e["t"] for e in got]
        assert times == sorted(times) and times[0] > time.time() * 1000 - 120_000
        for request in ops.received:  # signed as any delivery, and never a token
            Webhook(secret).verify(request.raw, request.headers)
            assert b"tok-ledger-1" not in request.raw
        listed = {t["name"]: t for t in b.call("GET", "/topics", ROOT_KEY).json()}
        assert listed[TOPIC]["publisher_name"] == "busbar"


def test_the_bus_topic_is_closed_to_clients_that_are_not_operators(
    redis_url: str, tmp_path: Path
) -> None:
    with bus(redis_url, tmp_path, workers=0) as b:
        b.client("shop")
        published = b.call("POST", f"/topics/{TOPIC}", "shop", events(1))
        assert published.status_code == 403 and "only busbar" in published.json()["error"]
        assert b.call("POST", f"/topics/{TOPIC}", "nobody", events(1)).status_code == 401
        body = {"topics": [TOPIC, "orders"], "callback": "http://127.0.0.1:9/x"}
        refused = b.call("POST", "/subscription", "shop", body)
        assert refused.status_code == 403 and "operator" in refused.json()["error"]
        assert b.call("GET", "/subscriptions", "shop").json() == []  # nothing half-done
        assert b.call("DELETE", f"/topics/{TOPIC}", "shop").status_code == 403

        mark = {"name": "shop", "token": "shop", "operator": True}
        assert b.call("POST", "/api_tokens", ROOT_KEY, mark).json()["operator"] is True
        assert b.call("POST", "/subscription", "shop", body).status_code == 204
        listing = {t["token"]: t["operator"] for t in b.call("GET", "/api_tokens", ROOT_KEY).json()}
        assert listing == {"shop": True}
        unmark = {**mark, "operator": False}
        assert b.call("POST", "/api_tokens", ROOT_KEY, unmark).json()["operator"] is False
        assert b.subscription("shop")["topics"] == ["orders"]  # no longer told
        bad = b.call("POST", "/api_tokens", ROOT_KEY, {**mark, "operator": "yes"})
        assert bad.status_code == 400 and "operator" in bad.json()["error"]
        taken = b.call("POST", "/api_tokens", ROOT_KEY, {"name": "other", "token": "shop",
                                                          "operator": True})  # fmt: skip
        assert taken.status_code == 409
        assert b.call("GET", "/api_tokens", ROOT_KEY).json()[0]["operator"] is False


def test_an_operator_is_told_when_a_worker_dies_with_jobs_in_hand(
    redis_url: str, tmp_path: Path
) -> None:
    started = threading.Event()

    def hang(_: Received) -> tuple[int, float]:
        started.set()
        return 200, 30.0

    slow, ops = Subscriber(responder=hang), Subscriber()
    with serving(slow), serving(ops), bus(redis_url, tmp_path, workers=0,
                                          **fast_scrub(5000, 2)) as b:  # fmt: skip
        operator(b, "noc", ops.url)
        b.client("pub")
        b.client("slowpoke")
        b.subscribe("slowpoke", slow.url, ["orders"], max=1, timeout=0)
        doomed = b.start_worker()
        b.publish("pub", "orders", events(1))
        assert started.wait(30)
        doomed.kill()
        doomed.wait()
        b.start_worker()
        wait_until(lambda: any(e["data"]["kind"] == "worker.dead" for e in ops.delivered), 60,
                   "the worker's death to be told")  # fmt: skip
        (dead,) = [e for e in ops.delivered if e["data"]["kind"] == "worker.dead"]
        assert dead["type"] == "delete" and dead["data"]["jobs"] >= 1
        assert f".{doomed.pid}." in dead["data"]["worker"]
        assert dead["url"].startswith("https://busbar.invalid/workers/")
