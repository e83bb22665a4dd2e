"""A lake replay's steps on a real server and a real subscriber: events keep their ids,
go in batches of their own that say which replay queued them, expire from the replay,
and a step is never queued twice."""

from __future__ import annotations

import pytest

from app.codec import pack_replayed
from app.errors import BusbarError, NotFound
from app.models.tokens import TokenStore
from app.services.replay import Replays, replay_id
from spec.app.delivery.delivery_bench import Bench
from spec.integration.subscriber import serving


@pytest.fixture
def bench(redis_client, keys, scripts) -> Bench:
    found = Bench(redis_client, keys, scripts, max_run=10, max_backoff_ms=1)
    TokenStore(redis_client, keys).create("shop", "sub")
    return found


@pytest.fixture
def replays(redis_client, keys, scripts) -> Replays:
    return Replays(redis_client, keys, scripts)


def lake_rows(n: int, start: int = 0) -> list[bytes]:
    url, data, given = "https://r.test/{}", '{{"i":{}}}', "evt_{:026d}"
    return [pack_replayed("orders", "create", url.format(i), 7, data.format(i), given.format(i))
            for i in range(start, start + n)]  # fmt: skip


def test_replayed_events_keep_their_ids_in_batches_of_their_own(bench: Bench, replays: Replays):
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], max=100, timeout=60_000, event_ids=True)
        bench.publish(2)  # a live batch, still open
        target = replays.target("shop")
        now = bench.clock()
        replays.start("rpl_1", target, {"selection": "{}", "selected": 3}, now, restart=False)
        lane, ttl = target.lane_of("orders", "create", None, 0)
        assert replays.step("rpl_1", target, 0, 3, lane, ttl, lake_rows(3), now) == 3
        bench.publish(1, start=2)  # live again: a new batch behind the replay's
        while bench.run().kind == "delivered":
            pass
        assert [len(r.events) for r in sub.received] == [2, 3]  # the newest still open
        bench.clock.advance(60_001)
        assert bench.run().kind == "delivered"
    assert [len(r.events) for r in sub.received] == [2, 3, 1]
    assert [r.headers.get("Busbar-Replay") for r in sub.received] == [None, "rpl_1", None]
    assert [e["id"] for e in sub.received[1].events] == [f"evt_{i:026d}" for i in range(3)]
    assert [e["url"] for e in sub.received[1].events] == [f"https://r.test/{i}" for i in range(3)]


def test_a_step_is_queued_once_whatever_is_retried(bench: Bench, replays: Replays, redis_client):
    bench.subscribe("http://127.0.0.1:9/never", ["orders"], max=2, timeout=0)
    target, now = replays.target("shop"), bench.clock()
    assert replays.start("rpl_2", target, {}, now, restart=False) == ("started", 0)
    assert replays.step("rpl_2", target, 0, 3, 10, 0, lake_rows(3), now) == 3
    with pytest.raises(BusbarError, match="moved on elsewhere"):  # its answer was lost
        replays.step("rpl_2", target, 0, 3, 10, 0, lake_rows(3), now)
    assert replays.queued_for(target) == 3
    assert replays.start("rpl_2", target, {}, now, restart=False) == ("resumed", 3)
    assert replays.step("rpl_2", target, 3, 2, 10, 0, lake_rows(1, 3), now) == 5  # one skipped
    assert replays.queued_for(target) == 4
    assert replays.start("rpl_2", target, {}, now, restart=True) == ("restarted", 0)


def test_ttl_counts_from_the_replay_and_the_listing_names_no_token(
    bench: Bench, replays: Replays, redis_client, keys
):
    bench.subscribe("http://127.0.0.1:9/never", [{"topic": "orders", "ttl": 60}], timeout=0)
    target, now = replays.target("shop"), bench.clock()
    assert target.lane_of("orders", "create", None, 5) == (10, 60_000)
    assert target.lane_of("users", "create", None, 5) is None  # not routed
    assert target.lane_of("users", "create", 3, 5) == (3, 5_000)  # --lane
    replays.start("rpl_3", target, {"by": "ops", "selection": '{"topics": ["orders"]}'}, now,
                  restart=False)  # fmt: skip
    replays.step("rpl_3", target, 0, 1, 10, 60_000, lake_rows(1), now)
    (batch,) = redis_client.lrange(keys.lane("sub", 10), 0, -1)
    (entry,) = redis_client.lrange(keys.batch("sub", batch.decode()), 3, -1)
    assert entry.startswith(b"%d|" % (now + 60_000))
    (listed,) = replays.listing()
    assert listed["target"] == "shop" and listed["position"] == 1
    assert listed["selection"] == {"topics": ["orders"]}
    assert "sub" not in str(listed.values())  # the token


def test_a_replays_id_comes_from_its_selection_and_target():
    assert replay_id({"since": 1}, "a") == replay_id({"since": 1}, "a")
    assert replay_id({"since": 1}, "a") != replay_id({"since": 1}, "b")


def test_no_subscriber_of_that_name(replays: Replays):
    with pytest.raises(NotFound, match="no subscriber named 'nobody'"):
        replays.target("nobody")


def test_live_events_never_coalesce_with_replayed_ones(bench: Bench, replays: Replays):
    """A live state, a replayed one of its url, the url live again: nothing merges. The
    last live state merged with the first once, in its place ahead of the replayed
    (older) one, so the receiver's last word on the url was the replay's; a replayed
    event is now its url's latest queued one (lib/batches.lua, coalesce_unmap)."""
    with serving() as sub:
        route = {"topic": "orders", "coalesce": True}
        bench.subscribe(sub.url, [route], max=100, timeout=60_000)
        bench.publish(1)  # https://o.test/0, live
        target, now = replays.target("shop"), bench.clock()
        replays.start("rpl_c", target, {}, now, restart=False)
        again = pack_replayed("orders", "create", "https://o.test/0", 7, '{"r":1}', "evt_x_1")
        replays.step("rpl_c", target, 0, 1, 10, 0, [again], now)
        bench.publish(1)  # the same url, live again: queued behind the replay's
        bench.clock.advance(60_001)
        while bench.run().kind == "delivered":
            pass
    assert [[e["data"] for e in r.events] for r in sub.received] == [
        [{"i": 0}],
        [{"r": 1}],
        [{"i": 0}],
    ]
    assert [r.headers.get("Busbar-Replay") for r in sub.received] == [None, "rpl_c", None]


def test_a_replay_takes_the_lane_the_targets_filters_give_each_event(
    bench: Bench, replays: Replays
):
    """As a publish would: the first route whose filter the event matches, and none when
    no route's filter holds (the row is skipped, not queued)."""
    routes = [
        {"topic": "orders", "priority": 0, "filter": {"data.i": {"$lt": 2}}},
        {"topic": "orders", "priority": 4, "filter": {"data.i": {"$in": [3, 4]}}},
    ]
    bench.subscribe("http://127.0.0.1:9/nobody", routes)
    target = replays.target("shop")
    lanes = [target.lane_of("orders", "create", None, 60, row) for row in lake_rows(6)]
    assert lanes == [(0, 60_000), (0, 60_000), None, (4, 60_000), (4, 60_000), None]
    assert target.lane_of("orders", "create", 7, 60, lake_rows(1)[0]) == (7, 60_000)  # --lane
