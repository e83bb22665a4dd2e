"""Expire and Autodrop on a real server: what they remove, what they keep, what they count."""

from __future__ import annotations

import time

import pytest

from app.models.subscription import parse_subscription
from app.services.shedding import Shedding, domains
from config.settings import Settings
from spec.app.delivery.delivery_bench import Bench
from spec.view import counter, noted


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture
def bench(redis_client, keys, scripts) -> Bench:
    return Bench(redis_client, keys, scripts)


def shedding(bench: Bench, **settings) -> Shedding:
    return Shedding(bench.client, bench.keys, bench.scripts, Settings(**settings))


def queued_urls(bench: Bench, lane: int = 10) -> list[str]:
    from app import codec

    urls = []
    for batch_id in bench.client.lrange(bench.keys.lane("sub", lane), 0, -1):
        for entry in bench.client.lrange(bench.keys.batch("sub", batch_id.decode()), 3, -1):
            urls.append(codec.unpack_entry(entry).url)
    return urls


def mixed_ttls(bench: Bench) -> None:
    """Lane 10 holds, in order: 2 short-lived, 2 long-lived, 2 short-lived events."""
    short = {"topic": "orders", "ttl": 1}
    bench.subscribe("https://s.test/in", [short, {"topic": "users", "ttl": 3600}], max=3)
    bench.publish(2, start=0)
    bench.publish(2, start=2, topic="users")
    bench.publish(2, start=4)


def test_head_mode_stops_at_the_first_live_event(bench: Bench):
    mixed_ttls(bench)
    removed = shedding(bench).expire(now_ms() + 2000)
    assert removed == 2
    assert queued_urls(bench) == [f"https://o.test/{i}" for i in (2, 3, 4, 5)]
    assert int(bench.client.hget(bench.keys.home("sub").event_gauge, "sub")) == 4
    assert int(bench.field("expired")) == 2


def test_entire_mode_removes_every_expired_event(bench: Bench):
    mixed_ttls(bench)
    removed = shedding(bench, cleanup_entire_queue=True).expire(now_ms() + 2000)
    assert removed == 4
    assert queued_urls(bench) == ["https://o.test/2", "https://o.test/3"]
    assert int(bench.client.hget(bench.keys.home("sub").event_gauge, "sub")) == 2
    assert int(bench.client.hget(bench.keys.home("sub").batch_gauge, "sub")) == 2
    assert counter(bench.client, bench.keys, "events.expired") == 4


def test_nothing_expires_early(bench: Bench):
    mixed_ttls(bench)
    assert shedding(bench, cleanup_entire_queue=True).expire(now_ms()) == 0
    assert len(queued_urls(bench)) == 6


def test_autodrop_does_nothing_with_memory_to_spare(bench: Bench):
    bench.subscribe("https://s.test/in", ["orders"])
    bench.publish(10)
    assert shedding(bench).autodrop(now_ms()) == 0
    assert len(queued_urls(bench)) == 10


def test_autodrop_sheds_the_lowest_lane_oldest_first(bench: Bench):
    routes = [{"topic": "orders", "priority": 0, "types": ["delete"]}, {"topic": "orders"}]
    bench.subscribe("https://s.test/in", routes, max=10)
    # events of 1 KB: about 3 MB queued, so that what Redis allocates meanwhile (a
    # keyspace table resized as batches go: some 200 KB on a fresh server) is noise
    bench.publish(3000, "create", pad=1000)  # lane 10: 300 batches
    bench.publish(20, "delete", start=1000, pad=1000)  # lane 0: 2 batches
    shed = shedding(bench)
    (domain,) = domains(bench.client, bench.keys)
    used = shed.free_bytes(domain)
    # pretend Redis may only use a little more than it does now: it is under MIN_FREE
    tight = Shedding(bench.client, bench.keys, shed.scripts,
                     Settings(redis_max_mem=shed.settings.redis_max_mem - used + 300_000,
                              redis_min_free=400_000))  # fmt: skip
    dropped = tight.autodrop(now_ms())
    assert dropped > 0 and dropped % 10 == 0
    remaining = queued_urls(bench, 10)
    assert remaining == [f"https://o.test/{i}" for i in range(dropped, 3000)]  # oldest first
    assert len(queued_urls(bench, 0)) == 20  # the high lane is untouched while the low has batches
    assert int(bench.field("autodropped")) == dropped
    assert counter(bench.client, bench.keys, "events.autodropped") == dropped
    assert int(bench.client.hget(bench.keys.home("sub").event_gauge, "sub")) == 3020 - dropped
    told = noted(bench.client, bench.keys.home("sub").operations)
    assert sum(t["events"] for t in told) == dropped  # told on busbar_operations
    assert {t["kind"] for t in told} == {"subscriber.dropped"}


def test_autodrop_trims_the_delivery_log_before_dropping_queued_events(bench: Bench):
    bench.subscribe("https://s.test/in", ["orders"], max=10)
    bench.publish(100)
    log = bench.keys.home("sub").delivery_log
    tried = bench.keys.home("sub").attempt_stream
    for i in range(1000):  # about 2 MB of already delivered batches, 1 MB of attempts
        bench.client.xadd(log, {"batch_id": i, "events": b"x" * 2000})
        bench.client.xadd(tried, {"batch": i, "body": b"x" * 1000})
    shed = shedding(bench)
    (domain,) = domains(bench.client, bench.keys)
    used = shed.free_bytes(domain)
    # 200 kB to free: trimming part of the log is enough, no event goes
    tight = Shedding(bench.client, bench.keys, shed.scripts,
                     Settings(redis_max_mem=shed.settings.redis_max_mem - used + 100_000,
                              redis_min_free=150_000))  # fmt: skip
    assert tight.autodrop(now_ms()) == 0
    # measured first: reading the log below (a reply of about 1 MB) moves Redis's own
    # figure by tens of kB for a while
    assert tight.free_bytes(domain) >= 2 * 150_000
    assert len(queued_urls(bench)) == 100
    left = bench.client.xrange(log)
    assert 500 < len(left) < 1000
    assert int(left[0][1][b"batch_id"]) == 1000 - len(left)  # the oldest went first
    assert bench.client.xlen(tried) == len(left)  # the attempts in the same steps


@pytest.mark.parametrize("entire", [False, True])
def test_a_backlog_is_expired_in_short_steps_with_the_same_result(bench: Bench, entire: bool):
    """Expire reads a budget of events per call (here 2, batches of 3): the steps resume
    where the last stopped, across removed, rewritten and kept batches and lanes."""
    routes = [
        {"topic": "orders", "ttl": 1},
        {"topic": "users", "ttl": 3600},
        {"topic": "stock", "priority": 3, "ttl": 1},
    ]
    bench.subscribe("https://s.test/in", routes, max=3)
    for start in range(0, 24, 4):
        bench.publish(2, start=start)
        bench.publish(2, start=start + 2, topic="users")
    bench.publish(3, start=100, topic="stock")
    calls = bench.client.info("commandstats")["cmdstat_evalsha"]["calls"]
    stepwise = Shedding(bench.client, bench.keys, bench.scripts, Settings(), expire_chunk=2)
    removed = stepwise.expire(now_ms() + 2000, entire=entire)
    calls = bench.client.info("commandstats")["cmdstat_evalsha"]["calls"] - calls
    assert queued_urls(bench, 3) == []  # all three stock events had expired
    if entire:
        assert removed == 15 and calls > 4
        assert queued_urls(bench) == [f"https://o.test/{i}" for i in range(24) if i % 4 > 1]
    else:  # head mode stops at the first live event of each lane
        assert removed == 5
        assert queued_urls(bench) == [f"https://o.test/{i}" for i in range(2, 24)]
    assert int(bench.client.hget(bench.keys.home("sub").event_gauge, "sub")) == 27 - removed


def test_each_chunk_of_the_last_resort_starts_again_from_the_lowest_lane(bench: Bench):
    """Publishing goes on while Autodrop runs: a low lane that filled again is emptied
    before a high lane is touched (a single pass down the lanes once dropped a batch of
    a subscriber that kept up, at priority 0, while lane 10 had filled behind it)."""
    routes = [{"topic": "orders", "priority": 0, "types": ["delete"]}, {"topic": "orders"}]
    bench.subscribe("https://s.test/in", routes, max=10)
    bench.publish(10, "create")  # lane 10: one batch
    bench.publish(10, "delete", start=100)  # lane 0: one batch
    shed = shedding(bench)
    (domain,) = domains(bench.client, bench.keys)
    assert shed.drop_lowest(domain) == (1, 10)
    assert queued_urls(bench, 10) == [] and len(queued_urls(bench, 0)) == 10
    bench.publish(10, "create", start=200)  # lane 10 fills again meanwhile
    assert shed.drop_lowest(domain) == (1, 10)
    assert queued_urls(bench, 10) == [] and len(queued_urls(bench, 0)) == 10
    assert shed.drop_lowest(domain) == (1, 10)  # only now the high lane: nothing else is left
    assert queued_urls(bench, 0) == []


def test_memory_is_read_once_the_server_has_freed_what_it_was_told_to(bench: Bench):
    """A key of many elements deleted is freed on the server's background thread
    (UNLINK; Valkey's DEL too, lazyfree being on): Autodrop reads the memory that is
    left once it is freed, or a shed looks like too little and the last resort drops
    a subscriber within its share. A 200,000-member set takes ~80 ms to free here."""
    bench.client.eval(
        "for i = 1, tonumber(ARGV[1]) do redis.call('SADD', KEYS[1], i) end", 1, "big", 200_000
    )
    shed = shedding(bench)
    (domain,) = domains(bench.client, bench.keys)
    held = shed.free_bytes(domain)
    bench.client.unlink("big")
    assert shed.free_bytes(domain) - held > 5_000_000  # the set's ~8 MB, all of it


def test_expire_walks_only_the_subscribers_with_events_queued(bench: Bench):
    """Before, each of a bus's subscribers cost a script every BUSBAR_EXPIRE_INTERVAL,
    queued or not: 10,000 idle ones, a third of a core between a worker and Redis."""
    mixed_ttls(bench)
    subscription = parse_subscription({"topics": ["orders"], "callback": "https://i.test/"},
                                      allow_http=True, policy=bench.policy)  # fmt: skip
    for i in range(30):
        bench.store.subscribe(f"idle{i}", subscription, now_ms())
    assert shedding(bench).expire(now_ms()) == 0  # the script loaded: one EVALSHA a call
    bench.client.config_resetstat()
    assert shedding(bench).expire(now_ms() + 2000) == 2
    scripts_run = bench.client.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert scripts_run == 1, scripts_run
    assert queued_urls(bench) == [f"https://o.test/{i}" for i in (2, 3, 4, 5)]
