"""A publish as steps: the topic step, then one step per shard. A publish id makes every
step safe to repeat; subscriptions, unsubscriptions and deletions are ordered steps that
a second call finishes whatever a crash interrupted."""

from __future__ import annotations

import redis

from app.lua import Scripts, _sources
from app.models import subscriber_calls as calls
from app.models.keys import Keys
from app.models.subscribers import SubscriberStore
from app.models.topics import TopicStore
from app.redis_client import connect
from app.services.ingest import Ingest
from config.settings import Settings
from spec.app.services.test_ingest import NOW, batch_contents, events, ingest_for, subscribe
from spec.app.test_redis_client import proxied
from spec.view import counter

TOKENS = ["s0", "s1", "a", "b"]  # on shards 2, 0, 3 and 1 of 4


def subscribed_all(store: SubscriberStore) -> None:
    for token in TOKENS:
        subscribe(store, ["orders"], token=token, timeout=60_000)


def queued(client: redis.Redis, keys: Keys) -> dict[str, list[str]]:
    return {t: [u for b in batch_contents(client, keys, t, 10) for u in b] for t in TOKENS}


def test_the_same_publish_id_is_queued_once(redis_client, keys, scripts):
    store = SubscriberStore(redis_client, keys, scripts)
    subscribed_all(store)
    ingest = ingest_for(redis_client, keys, scripts)
    assert ingest.publish("orders", "pub", events(2), NOW, publish_id="order-42").pairs == 8
    assert ingest.publish("orders", "pub", events(2), NOW, publish_id="order-42").pairs == 0
    third = ingest.publish("orders", "pub", events(1, start=5), NOW, publish_id="order-43")
    assert third.pairs == 4
    urls = [f"https://o.test/{i}" for i in (0, 1, 5)]
    assert queued(redis_client, keys) == {t: urls for t in TOKENS}
    assert counter(redis_client, keys, "events.published") == 3
    assert int(redis_client.hget(keys.topic("orders"), "counter")) == 3


def test_a_shard_step_whose_reply_is_lost_is_retried_without_queueing_twice(
    redis_url: str, redis_client: redis.Redis, keys: Keys, scripts: Scripts
):
    """With a publish id, busbar itself retries a step after a lost reply: the step had
    run, its record says so, and the retry changes nothing."""
    store = SubscriberStore(redis_client, keys, scripts)
    subscribed_all(store)
    ingest_for(redis_client, keys, scripts)  # the publisher's token
    sha = redis_client.script_load(_sources()["publish_queue"]).encode()  # so it runs at once
    with proxied(redis_url, trigger=sha) as proxy:
        settings = Settings(redis_url=f"redis://127.0.0.1:{proxy.port}/0")
        client = connect(settings)
        Ingest(client, keys, Scripts(client), settings).publish(
            "orders", "pub", events(3), NOW, publish_id="retry-me"
        )
        client.close()
    assert proxy.trigger is None  # a reply was dropped
    urls = [f"https://o.test/{i}" for i in range(3)]
    assert queued(redis_client, keys) == {t: urls for t in TOKENS}


def test_a_subscription_whose_catalog_step_never_ran_gets_nothing_until_resubscribed(
    redis_client, keys, scripts
):
    store = SubscriberStore(redis_client, keys, scripts)
    ingest = ingest_for(redis_client, keys, scripts)
    fields = calls.ShardFields(
        "https://s.test/in", "u", True, 0, 10, 0, b"job", "s0", False, "salt"
    )
    # only the shard step, as if the web process died after it
    scripts.run(calls.subscribe(keys, "s0", fields, NOW, 1, [], [("orders", "[]")]))
    assert ingest.publish("orders", "pub", events(1), NOW).pairs == 0
    subscribe(store, ["orders"], token="s0")
    assert ingest.publish("orders", "pub", events(1), NOW).pairs == 1


def test_an_interrupted_unsubscribe_or_delete_is_finished_by_calling_again(
    redis_client, keys, scripts
):
    store = SubscriberStore(redis_client, keys, scripts)
    ingest = ingest_for(redis_client, keys, scripts)
    subscribe(store, ["orders", "users"], token="s0", timeout=60_000)
    # unsubscribe: the catalog step only (nothing is routed), then the whole call again
    assert scripts.run(calls.unsubscribe_topic(keys, "s0", "users"))
    assert ingest.publish("users", "pub", events(1), NOW).pairs == 0
    store.unsubscribe_topic("s0", "users")  # finishes: no 404 although the catalog is done
    assert redis_client.hkeys(keys.routes("s0")) == [b"orders"]
    # delete: the catalog step only, then the whole call again drops what was queued
    ingest.publish("orders", "pub", events(2), NOW)
    scripts.run(calls.unroute(keys, "s0", False))
    assert ingest.publish("orders", "pub", events(1), NOW).pairs == 0
    assert store.delete("s0") == 2
    assert not redis_client.exists(keys.subscriber("s0"))
    assert counter(redis_client, keys, "events.removed") == 2


def test_an_interrupted_topic_delete_is_finished_by_deleting_again(redis_client, keys, scripts):
    store = SubscriberStore(redis_client, keys, scripts)
    ingest = ingest_for(redis_client, keys, scripts)
    subscribed_all(store)
    ingest.publish("orders", "pub", events(1), NOW)
    for token in TOKENS[:2]:  # some shard steps ran, then the process died
        redis_client.hdel(keys.routes(token), "orders")
    TopicStore(redis_client, keys, scripts).delete("orders", None)
    assert not redis_client.exists(keys.topic_subscribers("orders"))
    assert all(not redis_client.hexists(keys.routes(t), "orders") for t in TOKENS)
    assert ingest.publish("orders", "pub", events(1), NOW).pairs == 0


def test_a_publish_names_the_places_it_wrote_to(redis_client, keys, scripts):
    """What BUSBAR_REDIS_MIN_REPLICAS fences for it: the catalog and its subscribers'
    shards; a repeat of a publish id every shard, since the first try may have matched
    other subscribers (the topic's filters changed since)."""
    store = SubscriberStore(redis_client, keys, scripts)
    for token in ("s0", "b"):  # shards 2 and 1
        subscribe(store, ["orders"], token=token, timeout=60_000)
    ingest_for(redis_client, keys, scripts)  # the publisher's token
    steps = Ingest(redis_client, keys, scripts, Settings(), budget=0)  # every shard a step
    first = steps.publish("orders", "pub", events(1), NOW, publish_id="p-1")
    assert first == (2, (keys.catalog, keys.shard(1), keys.shard(2)))
    again = steps.publish("orders", "pub", events(1), NOW, publish_id="p-1")
    assert again == (0, (keys.catalog, *keys.all_shards()))
    assert steps.publish("users", "pub", events(1), NOW) == (0, (keys.catalog,))
