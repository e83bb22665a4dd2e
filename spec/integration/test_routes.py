"""Routes end to end, with real processes and a local subscriber that goes down and up."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from spec.integration.bus import bus, events
from spec.integration.processes import wait_until
from spec.integration.subscriber import Subscriber, serving
from spec.view import counter

# retries within 20-300 ms, however long the outage: no test waits out a default delay
FAST_RETRY = {
    "BUSBAR_RETRY_FIRST_MS": "20", "BUSBAR_MAX_BACKOFF_MS": "200",
    "BUSBAR_CIRCUIT_PROBE_MS": "200",
}  # fmt: skip


def outage() -> tuple[Subscriber, threading.Event]:
    """A subscriber answering 503 until `up` is set."""
    up = threading.Event()
    return Subscriber(responder=lambda _: (200 if up.is_set() else 503, 0.0)), up


def test_after_an_outage_the_higher_lane_goes_first_and_batches_never_mix(
    redis_url: str, redis_client, tmp_path: Path
):
    subscriber, up = outage()
    with serving(subscriber) as sub, bus(redis_url, tmp_path, **FAST_RETRY) as b:
        b.client("pub"), b.client("sub")
        routes = [{"topic": "orders", "priority": 0, "types": ["delete"]},
                  {"topic": "orders", "priority": 5, "types": ["create"]}]  # fmt: skip
        b.subscribe("sub", sub.url, routes, max=10, timeout=0)
        b.publish("pub", "orders", events(50, 0, "create"))
        wait_until(lambda: len(sub.received) >= 2, what="failing attempts")
        b.publish("pub", "orders", events(20, 100, "delete"))
        time.sleep(0.3)
        up.set()
        got = sub.wait_for(70)
        ok = [r for r in sub.received if r.status == 200]
        assert all(len({e["type"] for e in r.events}) == 1 for r in sub.received)
        types = [r.events[0]["type"] for r in ok]
        assert types == ["delete"] * 2 + ["create"] * 5
        assert [e["url"] for e in got if e["type"] == "create"] == [
            f"https://o.test/{i}" for i in range(50)
        ]


def test_events_that_expire_during_an_outage_are_never_delivered(
    redis_url: str, redis_client, tmp_path: Path
):
    subscriber, up = outage()
    with serving(subscriber) as sub, bus(redis_url, tmp_path, **FAST_RETRY) as b:
        b.client("pub"), b.client("sub")
        routes = [{"topic": "orders", "ttl": 1}, {"topic": "users"}]
        b.subscribe("sub", sub.url, routes, max=100, timeout=0)
        b.publish("pub", "orders", events(5))
        b.publish("pub", "users", events(2, 100))
        time.sleep(1.3)
        up.set()
        got = sub.wait_for(2)
        b.job_settled("sub")  # nothing more due
        assert [e["url"] for e in sub.delivered] == ["https://o.test/100", "https://o.test/101"]
        assert got == sub.delivered
        assert counter(redis_client, b.keys, "events.expired") == 5
        assert b.subscription("sub")["events"]["queued"] == 0


def test_coalescing_behind_a_failing_subscriber_delivers_only_the_last_update(
    redis_url: str, redis_client, tmp_path: Path
):
    subscriber, up = outage()
    with serving(subscriber) as sub, bus(redis_url, tmp_path, **FAST_RETRY) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, [{"topic": "orders", "coalesce": True}], max=10, timeout=0)
        b.publish("pub", "orders", {"type": "create", "url": "https://o.test/first"})
        wait_until(lambda: len(sub.received) >= 1, what="a failing attempt")
        for version in (1, 2, 3):
            b.publish(
                "pub",
                "orders",
                {"type": "update", "url": "https://o.test/a", "data": {"v": version}},
            )
        up.set()
        sub.wait_for(2)
        b.job_settled("sub")  # nothing more due
        assert [(e["url"], e.get("data")) for e in sub.delivered] == [
            ("https://o.test/first", None),
            ("https://o.test/a", {"v": 3}),
        ]
        assert counter(redis_client, b.keys, "events.coalesced") == 2


def test_exactly_max_attempts_then_a_dead_letter_then_replay(
    redis_url: str, redis_client, tmp_path: Path
):
    subscriber, up = outage()
    with serving(subscriber) as sub, bus(redis_url, tmp_path, **FAST_RETRY) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=10, timeout=0, max_attempts=3)
        b.publish("pub", "orders", events(4))
        wait_until(lambda: len(b.call("GET", "/subscriber/deadletters", "sub").json()) == 4,
                   what="dead letters")  # fmt: skip
        b.job_settled("sub")  # nothing left to try
        assert [r.status for r in sub.received] == [503, 503, 503]
        dead = b.call("GET", "/subscriber/deadletters", "sub").json()
        assert [(d["url"], d["attempts"], d["last_status"]) for d in dead] == [
            (f"https://o.test/{i}", 3, "503") for i in range(4)
        ]
        up.set()
        assert b.call("POST", "/subscriber/deadletters/replay", "sub").status_code == 202
        got = sub.wait_for(4)
        assert [e["url"] for e in got] == [f"https://o.test/{i}" for i in range(4)]
        assert b.call("GET", "/subscriber/deadletters", "sub").json() == []


def test_expire_finds_every_shards_queued_events_among_idle_subscribers(
    redis_url: str, tmp_path: Path
):
    """Expire walks only the subscribers with events queued, read from each shard's
    gauge (on a cluster, shards on every master); paused ones keep their events for it
    to find, `concurrency: 2` ones in partitions of their own; idle ones cost it nothing."""
    sub = Subscriber()
    with serving(sub), bus(redis_url, tmp_path, BUSBAR_EXPIRE_INTERVAL="1") as b:
        b.client("pub")
        names = [f"ledger_{i}" for i in range(8)]
        for i, name in enumerate(names):
            b.client(name)
            routes = [{"topic": "orders", "ttl": 1}, {"topic": "audits"}]
            b.subscribe(name, f"{sub.url}/{name}", routes, max=1, timeout=0,
                        concurrency=1 + i % 2)  # fmt: skip
            b.call("POST", "/subscriber/pause", name)
        for i in range(10):
            b.client(f"idle_{i}")
            b.subscribe(f"idle_{i}", f"{sub.url}/idle", ["invoices"])
        b.publish("pub", "orders", events(2))
        b.publish("pub", "audits", events(1, start=2))
        for name in names:
            wait_until(lambda n=name: b.subscription(n)["dropped"]["expired"] == 2, 30,
                       f"{name}'s expiry")  # fmt: skip
            b.call("POST", "/subscriber/resume", name)
        wait_until(lambda: len(sub.delivered) == len(names), 30, "each its durable event")
        assert {e["url"] for e in sub.delivered} == {"https://o.test/2"}
        assert sorted(r.path.rsplit("/", 1)[1] for r in sub.received) == sorted(names)
