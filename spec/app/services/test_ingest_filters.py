"""Content filters at ingest, on a real server (app/services/topic_rules.py with
lib/ingest.lua's pick_route): tokens that prefix one another and filter numbers past 9
are told apart, a publish matched against filters that changed meanwhile is matched
again and queues by the new ones, and a topic never filtered sends no version."""

from __future__ import annotations

import pytest
import redis

from app.lua import Scripts
from app.models.event import Event
from app.models.keys import Keys
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore
from app.models.topics import TopicStore
from app.services.ingest import Ingest, matched
from app.services.topic_rules import NONE, parse_stored
from config.settings import Settings

NOW = 1_767_225_600_000


def subscribe(store: SubscriberStore, token: str, routes: list) -> None:
    body = {"topics": routes, "callback": "https://s.test/in"}
    store.subscribe(token, parse_subscription(body, allow_http=False), NOW)


def queued(client: redis.Redis, keys: Keys, token: str) -> int:
    return int(client.hget(keys.home(token).event_gauge, token) or 0)


def filtered(client: redis.Redis, keys: Keys, token: str) -> int:
    return int(client.hget(keys.subscriber(token), "filtered") or 0)


@pytest.fixture
def store(redis_client: redis.Redis, keys: Keys, scripts: Scripts) -> SubscriberStore:
    """The publisher `pub`, and the subscriptions' store."""
    TokenStore(redis_client, keys).create("pub", "pub")
    return SubscriberStore(redis_client, keys, scripts)


@pytest.fixture
def ingest(redis_client: redis.Redis, keys: Keys, scripts: Scripts) -> Ingest:
    """A web process's publishing, with its own cache of the topics' filters."""
    return Ingest(redis_client, keys, scripts, Settings())


def order(i: int) -> Event:
    return Event("create", f"https://o.test/{i}", NOW, {"i": i})


def test_prefixed_tokens_and_filter_numbers_past_nine_are_told_apart(
    redis_client: redis.Redis, keys: Keys, store: SubscriberStore, ingest: Ingest
):
    subscribe(store, "s1", [{"topic": "orders", "filter": {"data.i": 1}}])
    subscribe(store, "s1x", [{"topic": "orders", "filter": {"data.i": 2}}])
    twelve = [
        {"topic": "orders", "filter": {"data.i": n}, "priority": n % 10} for n in range(1, 13)
    ]
    subscribe(store, "many", twelve)
    ingest.publish("orders", "pub", [order(2), order(11), order(13)], NOW)
    assert (queued(redis_client, keys, "s1"), filtered(redis_client, keys, "s1")) == (0, 3)
    assert (queued(redis_client, keys, "s1x"), filtered(redis_client, keys, "s1x")) == (1, 2)
    # 2 and 11 match filters 2 and 11 (not 1, which ',11,' must not be read as); 13 none
    assert (queued(redis_client, keys, "many"), filtered(redis_client, keys, "many")) == (2, 1)
    lanes = [redis_client.llen(keys.lane("many", lane)) for lane in (1, 2)]
    assert lanes == [1, 1]  # filter 11's lane 1, filter 2's lane 2


def test_a_publish_is_matched_again_when_the_filters_changed_since_it_last_looked(
    redis_client: redis.Redis, keys: Keys, scripts: Scripts, store: SubscriberStore, ingest: Ingest
):
    other = Ingest(redis_client, keys, scripts, Settings())  # another process, its own cache
    subscribe(store, "sub", [{"topic": "orders", "filter": {"data.i": {"$lt": 10}}}])
    ingest.publish("orders", "pub", [order(1), order(50)], NOW)  # loads the filters
    other.publish("orders", "pub", [order(2)], NOW)  # another process, its own copy
    assert (queued(redis_client, keys, "sub"), filtered(redis_client, keys, "sub")) == (2, 1)
    subscribe(store, "sub", [{"topic": "orders", "filter": {"data.i": {"$gte": 10}}}])
    ingest.publish("orders", "pub", [order(3), order(60)], NOW)  # its copy is stale
    assert (queued(redis_client, keys, "sub"), filtered(redis_client, keys, "sub")) == (3, 2)
    subscribe(store, "sub", ["orders"])  # no filter any more: everything again
    other.publish("orders", "pub", [order(4)], NOW)
    assert queued(redis_client, keys, "sub") == 4


def test_a_topic_deleted_and_made_again_never_reuses_a_version(
    redis_client: redis.Redis, keys: Keys, scripts: Scripts, store: SubscriberStore, ingest: Ingest
):
    subscribe(store, "sub", [{"topic": "orders", "filter": {"data.i": 1}}])
    ingest.publish("orders", "pub", [order(1)], NOW)
    first = int(redis_client.hget(keys.topic("orders"), "filters"))
    TopicStore(redis_client, keys, scripts).delete("orders", None)
    assert not redis_client.exists(keys.topic_filters("orders"))
    subscribe(store, "sub", [{"topic": "orders", "filter": {"data.i": 2}}])
    assert int(redis_client.hget(keys.topic("orders"), "filters")) > first
    ingest.publish("orders", "pub", [order(1), order(2)], NOW)  # held version is stale
    assert queued(redis_client, keys, "sub") == 2  # 1 before the delete, 2 by the new filter


def test_a_topic_without_filters_matches_nothing_and_one_with_them_matches_each_event():
    """matched()'s two ways: a topic with no filter builds no view and sends '' for each
    event; one with filters sends what each event matched."""
    bodies = [("create", f"https://o.test/{i}", "", b"packed") for i in (1, 50)]
    plain = matched(bodies, [order(1), order(50)], NONE)
    assert plain == [v for body in bodies for v in (*body, "")]
    rules = parse_stored(7, {"sub": b'[{"data.i": {"$lt": 10}}]'})
    assert matched(bodies, [order(1), order(50)], rules)[4::5] == [" sub=1", ""]


def test_a_publish_to_a_topic_that_never_had_a_filter_queues_for_every_route(
    redis_client: redis.Redis, keys: Keys, store: SubscriberStore, ingest: Ingest
):
    subscribe(store, "sub", ["orders"])
    ingest.publish("orders", "pub", [order(1), order(2)], NOW)
    assert redis_client.hget(keys.topic("orders"), "filters") is None  # version 0
    assert (queued(redis_client, keys, "sub"), filtered(redis_client, keys, "sub")) == (2, 0)
