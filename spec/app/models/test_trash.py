"""Deleting a subscriber with a large backlog: one O(lanes) step, then bounded purges;
an interrupted deletion leaves nothing a later call cannot finish, and nothing that
disturbs a new subscription of the same client."""

from __future__ import annotations

import redis

from app.lua import Scripts
from app.models.keys import LANES, Keys
from app.models.subscribers import SubscriberStore
from app.models.trash import Trash
from app.services.shedding import Shedding
from config.settings import Settings
from spec.app.services.test_ingest import NOW, events, ingest_for, subscribe


def keys_of(client: redis.Redis, token: str) -> set[str]:
    return {k.decode() for k in client.scan_iter(match=f"*{{sub:{token}}}*", count=10_000)}


def test_a_large_backlog_is_deleted_in_bounded_steps(redis_client, keys, scripts):
    store = SubscriberStore(redis_client, keys, scripts)
    ingest = ingest_for(redis_client, keys, scripts)
    subscribe(store, ["orders"], token="big", max=1, timeout=60_000)
    for start in range(0, 5_000, 500):
        ingest.publish("orders", "pub", events(500, start=start), NOW)
    assert redis_client.zcard(keys.batch_index(10)) == 5_000
    calls = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert store.delete("big") == 5_000
    assert redis_client.info("commandstats")["cmdstat_evalsha"]["calls"] - calls >= 3
    assert keys_of(redis_client, "big") == {keys.seq("big")}  # ids are never reused
    assert redis_client.zcard(keys.batch_index(10)) == 0
    assert not redis_client.exists(keys.trash)
    assert int(redis_client.hget(keys.counters, "events.removed")) == 5_000


def test_an_interrupted_delete_is_finished_later_without_touching_a_new_subscription(
    redis_client: redis.Redis, keys: Keys, scripts: Scripts
):
    store = SubscriberStore(redis_client, keys, scripts)
    ingest = ingest_for(redis_client, keys, scripts)
    subscribe(store, ["orders"], token="sub", max=2, timeout=60_000)
    ingest.publish("orders", "pub", events(6), NOW)
    # only the first step runs, as if the web process died right after it
    scripts.subscriber_delete(
        keys=[
            keys.tokens, keys.subscribers, keys.subscriber("sub"), keys.routes("sub"),
            keys.event_gauge, keys.batch_gauge, keys.counters, *keys.job_states("main"),
            keys.trash,
        ],
        args=[keys.prefix, "sub", "0", LANES[-1]],
    )  # fmt: skip
    subscribe(store, ["orders"], token="sub", max=2, timeout=60_000)
    ingest.publish("orders", "pub", events(2, start=100), NOW + 1)
    assert int(redis_client.hget(keys.event_gauge, "sub")) == 2
    # Autodrop meets the trash first (oldest): it frees it without counting it again
    Shedding(redis_client, keys, scripts, Settings()).scripts.batch_drop(
        keys=[keys.event_gauge, keys.batch_gauge, keys.counters, keys.batch_index(10)],
        args=[keys.prefix, 10, 1],
    )
    assert int(redis_client.hget(keys.event_gauge, "sub")) == 2
    assert Trash(redis_client, keys, scripts).purge_all() == 1
    assert redis_client.zcard(keys.batch_index(10)) == 1  # the new subscription's batch
    assert int(redis_client.hget(keys.counters, "events.removed")) == 6
    assert not redis_client.exists(keys.trash)
    (lane_batch,) = redis_client.lrange(keys.lane("sub", 10), 0, -1)
    assert redis_client.llen(keys.batch("sub", lane_batch.decode())) == 3 + 2
