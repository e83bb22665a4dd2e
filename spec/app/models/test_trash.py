"""Deleting a subscriber with a large backlog: one O(lanes) step, then bounded purges;
an interrupted deletion leaves nothing a later call cannot finish, and nothing that
disturbs a new subscription of the same client."""

from __future__ import annotations

import redis

from app.lua import Scripts
from app.models import subscriber_calls as calls
from app.models.keys import LANES, Keys
from app.models.shed_calls import batch_drop
from app.models.subscribers import SubscriberStore
from app.models.trash import Trash
from spec.app.services.test_ingest import NOW, events, ingest_for, subscribe
from spec.view import counter


def keys_of(client: redis.Redis, token: str) -> set[str]:
    return {k.decode() for k in client.scan_iter(match=f"*:sub:{token}:*", count=10_000)}


def test_a_large_backlog_is_deleted_in_bounded_steps(redis_client, keys, scripts):
    store = SubscriberStore(redis_client, keys, scripts)
    ingest = ingest_for(redis_client, keys, scripts)
    subscribe(store, ["orders"], token="big", max=1, timeout=60_000)
    for start in range(0, 5_000, 500):
        ingest.publish("orders", "pub", events(500, start=start), NOW)
    home = keys.home("big")
    assert redis_client.zcard(home.batch_index(10)) == 5_000
    calls = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert store.delete("big") == 5_000
    assert redis_client.info("commandstats")["cmdstat_evalsha"]["calls"] - calls >= 3
    assert keys_of(redis_client, "big") == {keys.seq("big")}  # ids are never reused
    assert redis_client.zcard(home.batch_index(10)) == 0
    assert not redis_client.exists(home.trash)
    assert counter(redis_client, keys, "events.removed") == 5_000


def test_an_interrupted_delete_is_finished_later_without_touching_a_new_subscription(
    redis_client: redis.Redis, keys: Keys, scripts: Scripts
):
    store = SubscriberStore(redis_client, keys, scripts)
    ingest = ingest_for(redis_client, keys, scripts)
    subscribe(store, ["orders"], token="sub", max=2, timeout=60_000)
    ingest.publish("orders", "pub", events(6), NOW)
    # only the steps before the purge run, as if the web process died right after them
    home = keys.home("sub")
    scripts.run(calls.unroute(keys, "sub", False))
    scripts.run(calls.delete(keys, "sub", LANES[-1]))
    subscribe(store, ["orders"], token="sub", max=2, timeout=60_000)
    ingest.publish("orders", "pub", events(2, start=100), NOW + 1)
    assert int(redis_client.hget(keys.home("sub").event_gauge, "sub")) == 2
    # Autodrop meets the trash first (oldest): it frees it without counting it again
    scripts.run(batch_drop(home, 10, 1))
    assert int(redis_client.hget(keys.home("sub").event_gauge, "sub")) == 2
    assert Trash(redis_client, keys, scripts).purge_all() == 1
    assert redis_client.zcard(home.batch_index(10)) == 1  # the new subscription's batch
    assert counter(redis_client, keys, "events.removed") == 6
    assert not redis_client.exists(home.trash)
    (lane_batch,) = redis_client.lrange(keys.lane("sub", 10), 0, -1)
    assert redis_client.llen(keys.batch("sub", lane_batch.decode())) == 3 + 2
