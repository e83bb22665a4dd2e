"""Coalescing: a newer event for a queued url replaces it in place, never one in flight."""

from __future__ import annotations

import pytest

from app import codec
from app.models.deadletters import DeadLetters
from app.models.event import Event
from app.models.trace_context import TraceContext
from spec.app.delivery.delivery_bench import Bench
from spec.integration.subscriber import Subscriber, serving
from spec.view import counter

COALESCING = [{"topic": "orders", "coalesce": True}]


@pytest.fixture
def bench(redis_client, keys, scripts) -> Bench:
    return Bench(redis_client, keys, scripts)


def publish(bench: Bench, *events: tuple[str, str, int]) -> None:
    now = bench.clock()
    batch = [Event(type_, url, now, {"v": v}) for type_, url, v in events]
    bench.ingest.publish("orders", "pub", batch, now)


def queued(bench: Bench) -> list[tuple[str, str, int]]:
    result = []
    for batch_id in bench.client.lrange(bench.keys.lane("sub", 10), 0, -1):
        for entry in bench.client.lrange(bench.keys.batch("sub", batch_id.decode()), 3, -1):
            e = codec.unpack_entry(entry)
            result.append((e.type, e.url, e.data["v"]))
    return result


def test_updates_to_one_url_keep_the_first_position_and_the_last_content(bench: Bench):
    bench.subscribe("https://s.test/in", COALESCING, max=10, timeout=60_000)
    publish(bench, ("create", "https://o.test/a", 1), ("create", "https://o.test/b", 1))
    publish(bench, ("update", "https://o.test/a", 2))
    publish(bench, ("update", "https://o.test/c", 1), ("delete", "https://o.test/a", 3))
    assert queued(bench) == [
        ("delete", "https://o.test/a", 3),
        ("create", "https://o.test/b", 1),
        ("update", "https://o.test/c", 1),
    ]
    assert counter(bench.client, bench.keys, "events.coalesced") == 2
    assert int(bench.field("coalesced")) == 2
    assert int(bench.client.hget(bench.keys.home("sub").event_gauge, "sub")) == 3


def test_a_plain_route_keeps_every_event(bench: Bench):
    bench.subscribe("https://s.test/in", ["orders"], timeout=60_000)
    publish(bench, ("create", "https://o.test/a", 1), ("update", "https://o.test/a", 2))
    assert len(queued(bench)) == 2
    assert not bench.client.exists(bench.keys.coalesce("sub"))


def test_coalescing_works_across_full_batches(bench: Bench):
    bench.subscribe("https://s.test/in", COALESCING, max=2, timeout=60_000)
    publish(bench, *[("create", f"https://o.test/{i}", 1) for i in range(5)])
    publish(bench, ("update", "https://o.test/3", 2))
    assert [v for _, _, v in queued(bench)] == [1, 1, 1, 2, 1]


def test_an_event_in_flight_is_never_replaced(bench: Bench):
    def publish_same_url_while_in_flight(request) -> tuple[int, float]:
        if request.events[0]["type"] == "create":
            publish(bench, ("update", "https://o.test/a", 2))
        return 200, 0.0

    with serving(Subscriber(responder=publish_same_url_while_in_flight)) as sub:
        bench.subscribe(sub.url, [{"topic": "orders", "coalesce": True}], max=10, timeout=0)
        publish(bench, ("create", "https://o.test/a", 1))
        assert bench.run().kind == "delivered"
        assert bench.run().kind == "delivered"
        assert [(r.events[0]["type"], r.events[0]["data"]["v"]) for r in sub.received] == [
            ("create", 1),
            ("update", 2),
        ]
    assert bench.client.hlen(bench.keys.coalesce("sub")) == 0  # cleaned with its batches


def test_three_updates_behind_a_failing_subscriber_deliver_only_the_last(
    redis_client, keys, scripts
):
    bench = Bench(redis_client, keys, scripts, max_backoff_ms=1)
    answers = iter([500])
    with serving(Subscriber(responder=lambda _: (next(answers, 200), 0.0))) as sub:
        bench.subscribe(sub.url, COALESCING, max=10, timeout=0)
        publish(bench, ("create", "https://o.test/x", 0))
        assert bench.run().kind == "failed"  # the create is now in a batch that failed once
        publish(bench, ("update", "https://o.test/a", 1))
        publish(bench, ("update", "https://o.test/a", 2))
        publish(bench, ("update", "https://o.test/a", 3))
        bench.clock.advance(10)
        assert bench.run().kind == "delivered"
        assert bench.run().kind == "delivered"
        delivered = [(e["url"], e["data"]["v"]) for r in sub.received[1:] for e in r.events]
        assert delivered == [("https://o.test/x", 0), ("https://o.test/a", 3)]


def test_coalescing_finds_an_event_moved_by_expiry(bench: Bench):
    routes = [
        {"topic": "orders", "coalesce": True, "ttl": 1, "types": ["noop"]},
        {"topic": "orders", "coalesce": True, "priority": 9, "types": ["update"]},
    ]
    bench.subscribe("https://s.test/in", routes, max=10, timeout=60_000)
    publish(bench, ("noop", "https://o.test/n", 1))
    bench.subscribe(
        "https://s.test/in", [{**r, "priority": 9} for r in routes], max=10, timeout=60_000
    )
    publish(bench, ("noop", "https://o.test/gone", 1), ("update", "https://o.test/a", 1))
    from app.services.shedding import Shedding

    Shedding(bench.client, bench.keys, bench.scripts, bench.settings).expire(
        bench.clock() + 2000, entire=True
    )
    publish(bench, ("update", "https://o.test/a", 2))
    (batch_id,) = bench.client.lrange(bench.keys.lane("sub", 9), 0, -1)
    entries = bench.client.lrange(bench.keys.batch("sub", batch_id.decode()), 3, -1)
    assert [(codec.unpack_entry(e).url, codec.unpack_entry(e).data["v"]) for e in entries] == [
        ("https://o.test/a", 2)
    ]


def test_a_rewrite_never_points_a_url_at_its_event_that_does_not_coalesce(bench: Bench):
    """delete a (kept), update a (coalescing, ttl 1 s), update b; the update of a expires
    and its batch is rewritten. The rewrite pointed a's merge entry at the url's last
    entry left, the delete, and the next update of a replaced it: the delete was lost."""
    routes = [
        {"topic": "orders", "types": ["delete"]},
        {"topic": "orders", "types": ["update"], "coalesce": True, "ttl": 1},
    ]
    bench.subscribe("https://s.test/in", routes, max=10, timeout=60_000)
    publish(bench, ("delete", "https://o.test/a", 1), ("update", "https://o.test/a", 2),
            ("update", "https://o.test/b", 1))  # fmt: skip
    from app.services.shedding import Shedding

    Shedding(bench.client, bench.keys, bench.scripts, bench.settings).expire(
        bench.clock() + 2000, entire=True
    )
    assert queued(bench) == [("delete", "https://o.test/a", 1)]
    publish(bench, ("update", "https://o.test/a", 3))
    assert queued(bench) == [("delete", "https://o.test/a", 1), ("update", "https://o.test/a", 3)]


@pytest.mark.parametrize("between", ["delete", "replayed"])
def test_an_event_of_the_url_between_two_states_keeps_them_apart(bench: Bench, between: str):
    """update, then an event of the url that does not coalesce (a plain route's delete,
    or a dead letter replayed), then update: the last update merges with nothing before
    it, so nothing overtakes the event between."""
    routes = [{"topic": "orders", "types": ["update"], "coalesce": True},
              {"topic": "orders", "types": ["delete"]}]  # fmt: skip
    if between == "delete":
        bench.subscribe("https://s.test/in", routes, max=10, timeout=60_000)
        publish(bench, ("update", "https://o.test/a", 1), ("delete", "https://o.test/a", 2))
    else:  # a real dead letter: its one attempt refused
        with serving(Subscriber(responder=lambda _request: (500, 0.0))) as sub:
            bench.subscribe(sub.url, routes, max=10, timeout=0, max_attempts=1)
            publish(bench, ("delete", "https://o.test/a", 2))
            assert bench.run().kind != "delivered"
        assert bench.client.llen(bench.keys.deadletters("sub")) == 1
        bench.subscribe("https://s.test/in", routes, max=10, timeout=60_000)
        publish(bench, ("update", "https://o.test/a", 1))
        DeadLetters(bench.client, bench.keys, bench.scripts).replay("sub", bench.clock())
        assert [t for t, _, _ in queued(bench)] == ["update", "delete"]
    publish(bench, ("update", "https://o.test/a", 3))
    assert queued(bench) == [("update", "https://o.test/a", 1), ("delete", "https://o.test/a", 2),
                             ("update", "https://o.test/a", 3)]  # fmt: skip


def lanes(bench: Bench) -> dict[int, list[tuple[str, str, int]]]:
    found = {}
    for lane in range(11):
        for batch_id in bench.client.lrange(bench.keys.lane("sub", lane), 0, -1):
            for entry in bench.client.lrange(bench.keys.batch("sub", batch_id.decode()), 3, -1):
                e = codec.unpack_entry(entry)
                found.setdefault(lane, []).append((e.type, e.url, e.data["v"]))
    return found


TWO_LANES = [
    {"topic": "orders", "types": ["update"], "priority": 5, "coalesce": True},
    {"topic": "orders", "types": ["delete"], "priority": 1, "coalesce": True},
]


@pytest.mark.parametrize(
    ("first", "second", "lane"), [("update", "delete", 1), ("delete", "update", 5)]
)
def test_a_newer_event_in_another_lane_removes_the_older_and_keeps_its_own_lane(
    bench: Bench, first: str, second: str, lane: int
):
    """An update (priority 5) then a delete (priority 1) of one url: the delete must not
    ride in the update's lane, and the update must not arrive after it; and the same the
    other way round."""
    bench.subscribe("https://s.test/in", TWO_LANES, max=10, timeout=60_000)
    publish(bench, (first, "https://o.test/a", 1), ("update", "https://o.test/b", 1))
    publish(bench, (second, "https://o.test/a", 2))
    found = lanes(bench)
    assert (second, "https://o.test/a", 2) in found[lane]
    assert all(url != "https://o.test/a" or v == 2 for q in found.values() for _, url, v in q)
    assert ("update", "https://o.test/b", 1) in found[5]
    assert int(bench.client.hget(bench.keys.home("sub").event_gauge, "sub")) == 2
    assert int(bench.field("coalesced")) == 1
    publish(bench, ("update" if lane == 1 else "delete", "https://o.test/a", 3))  # and back
    assert sum(url == "https://o.test/a" for q in lanes(bench).values() for _, url, _v in q) == 1


def test_the_last_event_of_a_batch_moving_lanes_takes_its_batch_along(bench: Bench):
    bench.subscribe("https://s.test/in", TWO_LANES, max=10, timeout=60_000)
    publish(bench, ("update", "https://o.test/a", 1))
    publish(bench, ("delete", "https://o.test/a", 2))
    assert lanes(bench) == {1: [("delete", "https://o.test/a", 2)]}
    assert int(bench.client.hget(bench.keys.home("sub").batch_gauge, "sub")) == 1
    assert bench.client.zcard(bench.keys.home("sub").batch_index(5)) == 0


def test_delivery_order_across_lanes_never_goes_back_to_an_older_state(bench: Bench):
    with serving() as sub:
        bench.subscribe(sub.url, TWO_LANES, max=10, timeout=0)
        publish(bench, ("update", "https://o.test/a", 1), ("update", "https://o.test/b", 1))
        publish(bench, ("delete", "https://o.test/a", 2))
        while bench.run().kind == "delivered":
            pass
        received = [(e["type"], e["url"], e["data"]["v"]) for r in sub.received for e in r.events]
    assert received == [("delete", "https://o.test/a", 2), ("update", "https://o.test/b", 1)]


def test_events_with_a_trace_context_coalesce_and_keep_the_newer_context(bench: Bench):
    """Lua reads a queued event's url (lib/batches.lua) with the trace fields after it."""
    bench.subscribe("https://s.test/in", COALESCING, max=10, timeout=60_000)
    now = bench.clock()
    for v, span in ((1, "1" * 16), (2, "2" * 16)):
        trace = TraceContext(f"00-{'a' * 32}-{span}-01", "k=v")
        event = Event("update", "https://o.test/a", now, {"v": v})
        bench.ingest.publish("orders", "pub", [event], now, trace=trace)
    assert queued(bench) == [("update", "https://o.test/a", 2)]
    batch_id = bench.client.lrange(bench.keys.lane("sub", 10), 0, -1)[0].decode()
    (entry,) = bench.client.lrange(bench.keys.batch("sub", batch_id), 3, -1)
    assert codec.unpack_entry(entry).trace == TraceContext(f"00-{'a' * 32}-{'2' * 16}-01", "k=v")
