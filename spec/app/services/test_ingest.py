"""Ingest on a real server: batches per subscriber and lane, gauges, expiry, job scheduling."""

from __future__ import annotations

import threading

import pytest
import redis

from app import codec
from app.errors import Forbidden, RateLimited, Unauthorized
from app.lua import Scripts
from app.models.event import Event
from app.models.keys import Keys
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore
from app.services.ingest import Ingest
from config.settings import Settings
from spec.view import counter

NOW = 1_800_000_000_000
JOB = codec.pack_job("batch", ["sub"])


@pytest.fixture
def store(redis_client: redis.Redis, keys: Keys, scripts: Scripts) -> SubscriberStore:
    return SubscriberStore(redis_client, keys, scripts)


def ingest_for(redis_client, keys, scripts, **settings) -> Ingest:
    TokenStore(redis_client, keys).create("pub", "pub")
    return Ingest(redis_client, keys, scripts, Settings(**settings))


@pytest.fixture
def ingest(redis_client, keys, scripts) -> Ingest:
    return ingest_for(redis_client, keys, scripts)


def subscribe(store: SubscriberStore, topics: list, token: str = "sub", **extra) -> None:
    body = {"topics": topics, "callback": "https://s.test/in", **extra}
    store.subscribe(token, parse_subscription(body, allow_http=False), NOW)


def events(n: int, type_: str = "create", start: int = 0) -> list[Event]:
    return [Event(type_, f"https://o.test/{i}", NOW + i, None) for i in range(start, start + n)]


def batch_contents(client: redis.Redis, keys: Keys, token: str, lane: int) -> list[list[str]]:
    ids = [i.decode() for i in client.lrange(keys.lane(token, lane), 0, -1)]
    result = []
    for batch_id in ids:
        header = client.lrange(keys.batch(token, batch_id), 0, 2)
        assert int(header[0]) == lane
        entries = client.lrange(keys.batch(token, batch_id), 3, -1)
        result.append([codec.unpack_entry(e).url for e in entries])
    return result


def test_batches_fill_to_max_then_a_new_one_starts(redis_client, keys, store, ingest):
    subscribe(store, ["orders"], max=3)
    assert ingest.publish("orders", "pub", events(7), NOW).pairs == 7
    batches = batch_contents(redis_client, keys, "sub", 10)
    assert [len(b) for b in batches] == [3, 3, 1]
    assert [u for b in batches for u in b] == [f"https://o.test/{i}" for i in range(7)]
    assert redis_client.get(keys.current("sub", 10)) == b"3"  # only the last takes events
    assert int(redis_client.hget(keys.home("sub").event_gauge, "sub")) == 7
    assert int(redis_client.hget(keys.home("sub").batch_gauge, "sub")) == 3
    assert redis_client.zrange(keys.home("sub").batch_index(10), 0, -1) == [
        b"sub/%012d" % i for i in (1, 2, 3)
    ]
    # a full batch makes the delivery job due now: it is instant, not scheduled
    assert redis_client.lrange(keys.home("sub").jobs_instant("main"), 0, -1) == [JOB]
    assert redis_client.zcard(keys.home("sub").jobs_scheduled("main")) == 0
    assert redis_client.smembers(keys.home("sub").jobs_index("main")) == {JOB}


def test_a_partial_batch_schedules_the_job_after_the_timeout(redis_client, keys, store, ingest):
    subscribe(store, ["orders"], timeout=250)
    ingest.publish("orders", "pub", events(2), NOW)
    assert redis_client.zrange(keys.home("sub").jobs_scheduled("main"), 0, -1, withscores=True) == [
        (JOB, NOW + 250)
    ]
    ingest.publish("orders", "pub", events(1, start=2), NOW + 100)  # same batch: no change
    assert redis_client.zscore(keys.home("sub").jobs_scheduled("main"), JOB) == NOW + 250
    assert redis_client.llen(keys.home("sub").jobs_instant("main")) == 0


def test_each_lane_has_its_own_batches(redis_client, keys, store, ingest):
    subscribe(store, [{"topic": "orders", "priority": 2, "types": ["delete"]}, {"topic": "orders"}])
    mixed = [
        Event(t, f"https://o.test/{i}", NOW, None) for i, t in enumerate(["create", "delete"] * 3)
    ]
    ingest.publish("orders", "pub", mixed, NOW)
    assert batch_contents(redis_client, keys, "sub", 2) == [
        ["https://o.test/1", "https://o.test/3", "https://o.test/5"]
    ]
    assert batch_contents(redis_client, keys, "sub", 10) == [
        ["https://o.test/0", "https://o.test/2", "https://o.test/4"]
    ]


def test_events_a_route_filters_out_are_not_queued(redis_client, keys, store, ingest):
    subscribe(store, [{"topic": "orders", "types": ["update"]}])
    assert ingest.publish("orders", "pub", events(3), NOW).pairs == 0
    assert redis_client.hget(keys.home("sub").event_gauge, "sub") is None
    assert int(redis_client.hget(keys.topic("orders"), "counter")) == 3


def test_expiry_is_fixed_when_queued(redis_client, keys, scripts, store):
    subscribe(store, [{"topic": "orders", "ttl": 30, "priority": 1}, {"topic": "users"}])
    ingest = ingest_for(redis_client, keys, scripts, default_ttl=5)
    ingest.publish("orders", "pub", events(1), NOW)
    ingest.publish("users", "pub", events(1), NOW)
    (batch_id,) = redis_client.lrange(keys.lane("sub", 1), 0, -1)
    (entry,) = redis_client.lrange(keys.batch("sub", batch_id.decode()), 3, -1)
    assert codec.unpack_entry(entry).expires_at == NOW + 30_000
    (batch_id,) = redis_client.lrange(keys.lane("sub", 10), 0, -1)
    (entry,) = redis_client.lrange(keys.batch("sub", batch_id.decode()), 3, -1)
    assert codec.unpack_entry(entry).expires_at == NOW + 5_000
    # resubscribing with another ttl changes nothing already queued
    subscribe(store, [{"topic": "orders", "ttl": 999, "priority": 0}])
    (batch_id,) = redis_client.lrange(keys.lane("sub", 1), 0, -1)
    (entry,) = redis_client.lrange(keys.batch("sub", batch_id.decode()), 3, -1)
    assert codec.unpack_entry(entry).expires_at == NOW + 30_000


def test_no_ttl_means_never(redis_client, keys, store, ingest):
    subscribe(store, ["orders"])
    ingest.publish("orders", "pub", events(1), NOW)
    (entry,) = redis_client.lrange(keys.batch("sub", 1), 3, -1)
    event = codec.unpack_entry(entry)
    assert event.expires_at == 0
    assert event.delivery() == {
        "topic": "orders",
        "type": "create",
        "url": "https://o.test/0",
        "t": NOW,
    }


def test_every_subscriber_gets_its_own_copy(redis_client, keys, store, ingest):
    subscribe(store, ["orders"], token="a", max=2)
    subscribe(store, ["orders"], token="b", max=5)
    assert ingest.publish("orders", "pub", events(4), NOW).pairs == 8
    assert [len(b) for b in batch_contents(redis_client, keys, "a", 10)] == [2, 2]
    assert [len(b) for b in batch_contents(redis_client, keys, "b", 10)] == [4]


def test_another_publisher_is_refused_and_nothing_is_queued(redis_client, keys, store, ingest):
    subscribe(store, ["orders"])
    ingest.publish("orders", "pub", events(1), NOW)
    TokenStore(redis_client, keys).create("intruder", "intruder")
    with pytest.raises(Forbidden):
        ingest.publish("orders", "intruder", events(5), NOW)
    assert int(redis_client.hget(keys.home("sub").event_gauge, "sub")) == 1
    assert int(redis_client.hget(keys.topic("orders"), "counter")) == 1


def test_an_unknown_or_deleted_token_writes_nothing(redis_client, keys, store, ingest):
    """The script checks the token with the write: a token deleted after the request
    was authenticated cannot claim a topic or queue anything."""
    subscribe(store, ["orders", "users"])
    with pytest.raises(Unauthorized):
        ingest.publish("users", "ghost", events(3), NOW)
    assert redis_client.hget(keys.home("sub").event_gauge, "sub") is None
    assert not redis_client.exists(keys.topic("users"))


def test_concurrent_publishers_lose_nothing_and_never_overfill(
    redis_url, redis_client, keys, store
):
    subscribe(store, ["orders"], max=7)
    TokenStore(redis_client, keys).create("pub", "pub")
    threads, per_thread = 8, 150
    failures: list[BaseException] = []

    def publish(n: int) -> None:
        try:
            publish_all(n)
        except BaseException as exc:  # a thread's exception would vanish; fail the test
            failures.append(exc)

    def publish_all(n: int) -> None:
        client = redis.Redis.from_url(redis_url)
        ingest = Ingest(client, keys, Scripts(client), Settings())
        for i in range(per_thread):
            batch = [
                Event("create", f"https://o.test/{n}/{i}/{j}", NOW, None) for j in range(i % 3 + 1)
            ]
            ingest.publish("orders", "pub", batch, NOW)

    workers = [threading.Thread(target=publish, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not failures
    expected = {
        f"https://o.test/{n}/{i}/{j}"
        for n in range(threads)
        for i in range(per_thread)
        for j in range(i % 3 + 1)
    }
    batches = batch_contents(redis_client, keys, "sub", 10)
    seen = [u for b in batches for u in b]
    assert len(seen) == len(expected) and set(seen) == expected
    assert max(len(b) for b in batches) <= 7
    assert all(len(b) == 7 for b in batches[:-1])
    assert int(redis_client.hget(keys.home("sub").event_gauge, "sub")) == len(expected)
    assert int(redis_client.hget(keys.home("sub").batch_gauge, "sub")) == len(batches)


def test_lua_writes_exactly_the_keys_that_keys_py_names(redis_client, keys, store, ingest):
    subscribe(store, [{"topic": "orders", "priority": 4}], max=1)
    ingest.publish("orders", "pub", events(2), NOW)
    home = keys.home("sub")
    expected = {
        keys.tokens, keys.topics, keys.topic("orders"),
        keys.topic_subscribers("orders"), keys.subscribers, keys.catalog.counters,
        keys.subscriber("sub"), keys.routes("sub"), keys.seq("sub"),
        keys.lane("sub", 4), keys.batch("sub", 1), keys.batch("sub", 2), home.batch_index(4),
        home.event_gauge, home.batch_gauge, home.jobs_index("main"), home.jobs_instant("main"),
        home.counters, keys.catalog.rate("pub"), keys.names,
    }  # fmt: skip
    actual = {k.decode() for k in redis_client.keys("*")}
    assert actual == expected


def test_a_fan_out_over_the_budget_is_queued_in_several_short_scripts(
    redis_client, keys, scripts, store
):
    """3 events x 7 subscribers with a budget of 6 appends: the topic step serves two
    subscribers, shard steps the rest two at a time; everyone gets all three, once."""
    TokenStore(redis_client, keys).create("pub", "pub")
    tokens = [f"s{i}" for i in range(7)]
    for token in tokens:
        subscribe(store, ["orders"], token=token, timeout=60_000)
    ingest = Ingest(redis_client, keys, scripts, Settings(), budget=6)
    calls = redis_client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    assert ingest.publish("orders", "pub", events(3), NOW).pairs == 21
    calls = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"] - calls
    assert calls >= 4  # publish, then publish_queue for the others, two at a time
    for token in tokens:
        assert batch_contents(redis_client, keys, token, 10) == [
            [f"https://o.test/{i}" for i in range(3)]
        ]
    published, added = (
        counter(redis_client, keys, n) for n in ("events.published", "events.added")
    )
    assert (published, added) == (3, 21)
    assert int(redis_client.hget(keys.topic("orders"), "counter")) == 3


def test_a_publisher_over_its_rate_is_refused_and_told_when_to_come_back(
    redis_client, keys, scripts, store
):
    """A token bucket per publisher: BUSBAR_PUBLISH_BURST at once, then
    BUSBAR_PUBLISH_RATE events a second; beyond it nothing is written and the error says
    how long until the bucket holds the events (the 429's Retry-After)."""
    limited = ingest_for(redis_client, keys, scripts, publish_rate=10, publish_burst=1000)
    subscribe(store, ["orders"], max=100)
    assert limited.publish("orders", "pub", events(600), NOW).pairs == 600
    assert limited.publish("orders", "pub", events(400), NOW + 1).pairs == 400  # the burst, spent
    with pytest.raises(RateLimited) as over:
        limited.publish("orders", "pub", events(5), NOW + 2)
    assert 400 <= over.value.delay_ms <= 500  # 5 events at 10 a second, less 0.002 s of refill
    assert int(redis_client.hget(keys.home("sub").event_gauge, "sub")) == 1000  # nothing more
    assert limited.publish("orders", "pub", events(5), NOW + 502).pairs == 5  # refilled
    other = Ingest(redis_client, keys, scripts, Settings(publish_rate=0))
    assert other.publish("orders", "pub", events(1000), NOW + 503).pairs == 1000  # 0: no limit
    assert redis_client.pttl(keys.catalog.rate("pub")) > 0  # forgotten once full again
