"""Event ids (`"event_ids": true`): stable across retries, dead-letter replay and
publishes repeated with the same publish id; absent otherwise (Routemaster's body)."""

from __future__ import annotations

import dataclasses

import pytest

from app.models import event_ids
from app.models.deadletters import DeadLetters
from app.models.event import Event
from spec.app.delivery.delivery_bench import Bench
from spec.integration.subscriber import Subscriber, serving


@pytest.fixture
def bench(redis_client, keys, scripts) -> Bench:
    return Bench(redis_client, keys, scripts, max_backoff_ms=1)


def publish(bench: Bench, urls: list[str], publish_id: str | None = None, t: int = 0) -> None:
    now = bench.clock()
    events = [Event("update", url, t or now, {"n": i}) for i, url in enumerate(urls)]
    if publish_id:  # as POST /topics does with an Idempotency-Key header
        events = [
            dataclasses.replace(e, event_id=event_ids.for_publish("orders", publish_id, i))
            for i, e in enumerate(events)
        ]
    bench.ingest.publish("orders", "pub", events, now)


def ids(request) -> list[str]:
    return [e["id"] for e in request.events]


def test_without_event_ids_the_body_is_routemasters(bench: Bench):
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], timeout=0)
        publish(bench, ["https://o.test/a"], publish_id="p-1")
        assert bench.run().kind == "delivered"
    (request,) = sub.received
    assert [set(e) for e in request.events] == [{"topic", "type", "url", "t", "data"}]


def test_ids_are_distinct_and_the_same_on_every_retry(bench: Bench):
    answers = iter([500, 503])
    with serving(Subscriber(responder=lambda _: (next(answers, 200), 0.0))) as sub:
        bench.subscribe(sub.url, ["orders"], timeout=0, event_ids=True)
        publish(bench, ["https://o.test/a", "https://o.test/b", "https://o.test/a"])
        for kind in ("failed", "failed", "delivered"):
            bench.clock.advance(10)
            assert bench.run().kind == kind
    first = ids(sub.received[0])
    assert len(set(first)) == 3 and all(i.startswith("evt_") for i in first)
    assert [ids(r) for r in sub.received] == [first] * 3
    assert [list(e)[:4] for e in sub.received[0].events] == [["topic", "type", "url", "t"]] * 3


def test_replayed_dead_letters_keep_their_ids(bench: Bench):
    answers = iter([500])
    with serving(Subscriber(responder=lambda _: (next(answers, 200), 0.0))) as sub:
        bench.subscribe(sub.url, ["orders"], timeout=0, max_attempts=1, event_ids=True)
        publish(bench, ["https://o.test/a", "https://o.test/b"], publish_id="p-7")
        publish(bench, ["https://o.test/c"])
        assert bench.run().kind == "failed"
        bench.clock.advance(10)
        assert bench.run().kind == "idle"  # its events are dead letters now
        dead = DeadLetters(bench.client, bench.keys, bench.scripts)
        assert dead.replay("sub", bench.clock()) == 3
        bench.clock.advance(10)
        assert bench.run().kind == "delivered"
    failed, replayed = sub.received
    assert ids(replayed) == ids(failed)


def test_a_publish_repeated_with_its_publish_id_repeats_its_ids(bench: Bench):
    """What makes a publisher's retry after a lost answer safe: the copies carry the same
    ids, although the bus gave them another reception time."""
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], timeout=0, event_ids=True)
        urls = ["https://o.test/a", "https://o.test/b"]
        publish(bench, urls, publish_id="retry-me")
        bench.clock.advance(5)
        publish(bench, urls, publish_id="retry-me")
        publish(bench, urls, publish_id="another")
        assert bench.run().kind == "delivered"
    (request,) = sub.received
    got = ids(request)
    assert got[0:2] == got[2:4]
    assert request.events[0]["t"] != request.events[2]["t"]
    assert len(set(got[0:2] + got[4:6])) == 4


def test_without_a_publish_id_the_id_is_the_events_content(bench: Bench):
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], timeout=0, event_ids=True)
        publish(bench, ["https://o.test/a"], t=1_000)
        publish(bench, ["https://o.test/a"], t=1_000)  # identical: the same event
        publish(bench, ["https://o.test/a"], t=1_001)
        assert bench.run().kind == "delivered"
    (request,) = sub.received
    first, same, later = ids(request)
    assert first == same != later


def test_a_coalesced_event_arrives_with_the_newest_events_id(bench: Bench):
    answers = iter([500])
    with serving(Subscriber(responder=lambda _: (next(answers, 200), 0.0))) as sub:
        routes = [{"topic": "orders", "coalesce": True}]
        bench.subscribe(sub.url, routes, max=10, timeout=0, event_ids=True)
        publish(bench, ["https://o.test/a"], publish_id="one")
        assert bench.run().kind == "failed"
        publish(bench, ["https://o.test/a"], publish_id="two")  # replaces "one" in place
        bench.clock.advance(10)
        assert bench.run().kind == "delivered"
        publish(bench, ["https://o.test/a"], publish_id="two")  # "two" again, on its own
        assert bench.run().kind == "delivered"
    failed, coalesced, again = (ids(r) for r in sub.received)
    assert coalesced == again != failed
