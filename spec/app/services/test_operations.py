"""The Operations relay on a real server: the operations streams published to the bus's
topic in order, exactly once when a step is cut short, with no client able to publish."""

from __future__ import annotations

import json

import pytest
import redis

from app import codec
from app.errors import Forbidden
from app.lua import Scripts
from app.models.keys import SYSTEM_PUBLISHER, Keys
from app.models.pausing import Pausing
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.services import operations
from app.services.ingest import Ingest
from app.services.operations import TOPIC, Operations
from config.settings import Settings

NOW = 1_800_000_000_000


@pytest.fixture
def store(redis_client: redis.Redis, keys: Keys, scripts: Scripts) -> SubscriberStore:
    return SubscriberStore(redis_client, keys, scripts)


@pytest.fixture
def relay(redis_client: redis.Redis, keys: Keys, scripts: Scripts) -> Operations:
    ingest = Ingest(redis_client, keys, scripts, Settings())
    return Operations(redis_client, keys, ingest, "https://ops.test")


def subscribe(store: SubscriberStore, token: str, name: str, topics: list[str]) -> None:
    store.subscribe(token, parse_subscription(
        {"topics": topics, "callback": "https://s.test/in", "max": 1000}, allow_http=False
    ), NOW)  # fmt: skip
    store._redis.hset(store._keys.subscriber(token), "name", name)


def told(client: redis.Redis, keys: Keys, token: str) -> list[dict]:
    """What the operator has queued, oldest first, as its events' data."""
    found = []
    for lane_id in client.lrange(keys.lane(token, 10), 0, -1):
        for entry in client.lrange(keys.batch(token, lane_id.decode()), 3, -1):
            event = codec.unpack_entry(entry)
            assert event.topic == TOPIC
            found.append({"url": event.url, "t": event.t, **event.data})
    return found


def test_pauses_are_published_in_order_once(redis_client, keys, scripts, store, relay):
    subscribe(store, "noc", "noc", [TOPIC])
    subscribe(store, "tok-ledger", "ledger", ["orders"])
    pausing = Pausing(redis_client, keys, scripts)
    pausing.pause("tok-ledger", "root", NOW)
    pausing.resume("tok-ledger", "ledger", NOW + 5)
    assert relay.relay() == 2
    assert relay.relay() == 0  # nothing new: nothing published again
    got = told(redis_client, keys, "noc")
    assert [(e["kind"], e["by"], e["subscriber"]) for e in got] == [
        ("subscriber.paused", "root", "ledger"),
        ("subscriber.resumed", "ledger", "ledger"),
    ]
    assert got[0]["url"] == "https://ops.test/subscribers/ledger"
    assert b"tok-ledger" not in b"".join(
        json.dumps(e).encode() for e in got
    )  # a client's name, never its token
    topic = redis_client.hgetall(keys.topic(TOPIC))
    assert topic[b"publisher"] == SYSTEM_PUBLISHER.encode() and topic[b"counter"] == b"2"


def test_a_step_cut_short_is_repeated_exactly(redis_client, keys, scripts, store, relay):
    subscribe(store, "noc", "noc", [TOPIC])
    for i in range(3):
        operations.note_worker_dead(redis_client, keys, f"host:{i}", i + 1)
    catalog = keys.catalog
    # a step that fixed its entries and published them, then died before its cursor moved
    first = redis_client.xrange(catalog.operations)
    redis_client.hset(catalog.operations_relay, "upto", first[1][0])
    assert relay._step(catalog) == 2
    redis_client.hdel(catalog.operations_relay, "cursor")  # its cursor never moved
    redis_client.hset(catalog.operations_relay, "upto", first[1][0])
    operations.note_worker_dead(redis_client, keys, "host:3", 4)  # noted meanwhile
    assert relay.relay() == 2 + 2  # the step again (dropped as a repeat), then the rest
    workers = [(e["worker"], e["jobs"], e["kind"]) for e in told(redis_client, keys, "noc")]
    assert workers == [(f"host:{i}", i + 1, "worker.dead") for i in range(4)]
    assert redis_client.hget(catalog.operations_relay, "upto") is None


def test_no_client_publishes_to_the_bus_topic(redis_client, keys, scripts, relay):
    with pytest.raises(Forbidden, match="only busbar"):
        operations.refuse_publish(TOPIC)
    operations.refuse_publish("orders")  # any other topic: no objection
    # a topic a client claimed before busbar reserved it: the relay is refused, not lost
    redis_client.hset(keys.topic(TOPIC), "publisher", "old-client")
    operations.note_worker_dead(redis_client, keys, "host:0", 1)
    with pytest.raises(Forbidden):
        relay.relay()
    redis_client.hdel(keys.topic(TOPIC), "publisher")
    assert relay.relay() == 1  # told once the topic is the bus's again
