"""Partitions on a real Redis: where the queueing step puts each event (the same place
app/models/partitions.py computes), what a key and a url do, and the layout a change of
concurrency leaves while it drains."""

from __future__ import annotations

import pytest

from app import codec
from app.errors import InvalidInput
from app.models import partitions
from app.models.event import Event
from app.models.keys import LEGACY_LANE
from app.models.subscribers import SubscriberStore
from spec.app.models.test_event import parse
from spec.app.services.test_ingest import NOW, ingest_for, subscribe


@pytest.fixture
def store(redis_client, keys, scripts) -> SubscriberStore:
    return SubscriberStore(redis_client, keys, scripts)


def queued_in(client, keys, pid: str) -> list[str]:
    """(url or key) of every event queued in one partition, in its order."""
    found = []
    for batch_id in client.lrange(keys.lane(pid, LEGACY_LANE), 0, -1):
        for entry in client.lrange(keys.batch(pid, batch_id.decode()), 3, -1):
            event = codec.unpack_entry(entry)
            found.append(event.key if event.key is not None else event.url)
    return found


def urls_in(client, keys, pid: str) -> list[int]:
    """The number in the url of every event queued in one partition, in its order."""
    return [int(codec.unpack_entry(entry).url.rsplit("/", 1)[1])
            for batch_id in client.lrange(keys.lane(pid, LEGACY_LANE), 0, -1)
            for entry in client.lrange(keys.batch(pid, batch_id.decode()), 3, -1)]  # fmt: skip


def test_each_event_lands_in_the_partition_its_key_hashes_to(redis_client, keys, scripts, store):
    subscribe(store, ["orders"], concurrency=2, timeout=60_000)  # 8 partitions, 2 in flight
    ingest = ingest_for(redis_client, keys, scripts)
    sent = [Event("update", f"https://o.test/{i % 12}", NOW, None) for i in range(48)]
    sent += [Event("update", f"https://o.test/x{i}", NOW, None, key=f"k{i % 3}") for i in range(9)]
    assert ingest.publish("orders", "pub", sent, NOW).pairs == 57
    layout = partitions.pids(redis_client, keys, "sub")
    assert partitions.count(2) == 8 and layout == [
        f"sub#8.{p}" for p in range(9)
    ]  # the aside partition last
    where = {pid: queued_in(redis_client, keys, pid) for pid in layout}
    for e in sent:  # the Lua step and the Python function agree, key first, else url
        key = e.key or e.url
        assert key in where[partitions.pid("sub", 8, partitions.partition_of(key, 8))]
    for pid, keys_there in where.items():  # each key's events in publish order, together
        expected = [e.key or e.url for e in sent if partitions.partition_of(e.key or e.url, 8)
                    == int(pid.rsplit(".", 1)[1])]  # fmt: skip
        assert keys_there == expected
    assert len([p for p in where.values() if p]) >= 5  # 15 keys spread over the 8
    assert not redis_client.exists(keys.lane("sub", LEGACY_LANE))  # nothing in the old place


def test_concurrency_one_queues_exactly_as_before(redis_client, keys, scripts, store):
    """No partition keys, no flight hash, no `concurrency` field: the layout of a
    subscriber from before ordering keys existed."""
    subscribe(store, ["orders"], timeout=60_000)
    ingest_for(redis_client, keys, scripts).publish(
        "orders", "pub", [Event("update", "https://o.test/1", NOW, None, key="k")], NOW
    )
    assert queued_in(redis_client, keys, "sub") == ["k"]
    assert not redis_client.hexists(keys.subscriber("sub"), "concurrency")
    assert redis_client.keys("*part:*") == []


def test_a_change_of_concurrency_drains_the_old_layout_first(redis_client, keys, scripts, store):
    subscribe(store, ["orders"], timeout=60_000)
    ingest = ingest_for(redis_client, keys, scripts)
    ingest.publish("orders", "pub", [Event("update", "https://o.test/1", NOW, None)], NOW)
    subscribe(store, ["orders"], timeout=60_000, concurrency=4)
    assert redis_client.hget(keys.subscriber("sub"), "draining") == b"1"
    assert partitions.pids(redis_client, keys, "sub") == [
        *(f"sub#16.{p}" for p in range(17)),
        "sub",
    ]
    subscribe(store, ["orders"], timeout=5, concurrency=4)  # the same concurrency: taken
    assert redis_client.hget(keys.subscriber("sub"), "timeout") == b"5"


def test_a_change_while_one_drains_is_taken_and_keeps_every_keys_order(
    redis_client, keys, scripts, store
):  # fmt: skip
    """Issue 53, defect 4: while a change drained (an endpoint failing, say), every
    further change was a 409, and the subscriber was stuck in the layout. Now the layout
    that waited is folded into the newest, each key's events in order after the
    draining layout's; a change back to the draining layout simply ends the wait."""
    subscribe(store, ["orders"], timeout=60_000)
    ingest = ingest_for(redis_client, keys, scripts)

    def publish(start: int) -> None:
        events = [Event("update", f"https://o.test/{i}", NOW, None, key=f"k{i % 7}")
                  for i in range(start, start + 21)]  # fmt: skip
        ingest.publish("orders", "pub", events, NOW)

    publish(0)  # in the layout of 1, which will drain
    subscribe(store, ["orders"], timeout=60_000, concurrency=4)
    publish(21)  # in the 16 partitions, waiting for the drain
    subscribe(store, ["orders"], timeout=60_000, concurrency=2)  # taken: no 409
    assert redis_client.hget(keys.subscriber("sub"), "draining") == b"1"
    assert partitions.pids(redis_client, keys, "sub") == [
        *(f"sub#8.{p}" for p in range(9)), "sub",
    ]  # fmt: skip
    assert redis_client.keys("*part:16.*") == []  # the 16 left nothing behind
    layout = partitions.pids(redis_client, keys, "sub")
    waiting = {pid: urls_in(redis_client, keys, pid) for pid in layout}
    assert waiting["sub"] == list(range(21))  # the drain's, untouched
    for k in range(7):  # each key's later events in its partition, in publish order
        pid = partitions.pid("sub", 8, partitions.partition_of(f"k{k}", 8))
        assert [i for i in waiting[pid] if i % 7 == k] == [21 + k, 28 + k, 35 + k]
    home = keys.home("sub")
    assert int(redis_client.hget(home.event_gauge, "sub")) == 42
    batches = sum(redis_client.llen(keys.lane(pid, LEGACY_LANE)) for pid in layout)
    assert int(redis_client.hget(home.batch_gauge, "sub")) == batches

    publish(42)
    subscribe(store, ["orders"], timeout=60_000)  # back to 1, the layout that drains
    assert not redis_client.hexists(keys.subscriber("sub"), "draining")
    assert partitions.pids(redis_client, keys, "sub") == ["sub"]
    queued = urls_in(redis_client, keys, "sub")
    assert queued[:21] == list(range(21)) and sorted(queued) == list(range(63))
    for k in range(7):  # the partitions' events each key's in order (not across keys)
        assert [i for i in queued if i % 7 == k] == list(range(k, 63, 7))
    assert redis_client.keys("*part:*") == []


def test_a_change_with_nothing_queued_is_done_at_once(redis_client, keys, scripts, store):
    subscribe(store, ["orders"], concurrency=4)
    subscribe(store, ["orders"], concurrency=2)
    assert not redis_client.hexists(keys.subscriber("sub"), "draining")
    assert partitions.pids(redis_client, keys, "sub") == [
        f"sub#8.{p}" for p in range(9)
    ]  # the aside partition last
    assert redis_client.keys("*part:16.*") == []  # the old layout's flight hashes went


def test_deleting_a_partitioned_subscriber_leaves_nothing(redis_client, keys, scripts, store):
    subscribe(store, ["orders"], concurrency=4, timeout=60_000)
    ingest = ingest_for(redis_client, keys, scripts)
    ingest.publish("orders", "pub", [Event("update", f"https://o.test/{i}", NOW, None)
                                     for i in range(20)], NOW)  # fmt: skip
    assert store.delete("sub") == 20
    assert redis_client.keys("*sub:sub:*") == [keys.seq("sub").encode()]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("", "key must be a string of 1 to 256 bytes"),
        ("é" * 129, "key must be a string of 1 to 256 bytes"),
        (5, "key must be a string of 1 to 256 bytes"),
        ("a\nb", "key must hold no control characters"),
        ("\ud800", "key must be valid UTF-8"),
    ],
)
def test_a_bad_key_is_refused_naming_it(key, message):
    with pytest.raises(InvalidInput, match=message):
        parse({"type": "create", "url": "https://a.test/1", "key": key})


def test_a_key_of_256_bytes_is_taken_and_delivered_as_given():
    event = parse({"type": "create", "url": "https://a.test/1", "key": "é" * 128})
    entry = b"0|" + event.pack("orders")
    assert codec.unpack_entry(entry).delivery()["key"] == "é" * 128


def test_a_keyed_event_coalesces_at_the_end_of_its_key_not_in_its_older_place(
    redis_client, keys, scripts, store
):  # fmt: skip
    """The composition matrix's find (docs/tests.md): url a, url b, url a again, one
    explicit key, on a coalescing route: the newer a replaced the older in place and
    arrived before b, out of the key's publish order. Now it queues at the end; a url
    whose key is itself still merges in place."""
    subscribe(store, [{"topic": "orders", "coalesce": True}], timeout=60_000)
    ingest = ingest_for(redis_client, keys, scripts)

    def queued() -> list[tuple[str, dict]]:
        lane = redis_client.lrange(keys.lane("sub", LEGACY_LANE), 0, -1)
        entries = [
            e for i in lane for e in redis_client.lrange(keys.batch("sub", i.decode()), 3, -1)
        ]
        return [(codec.unpack_entry(e).url.rsplit("/", 1)[1], codec.unpack_entry(e).data)
                for e in entries]  # fmt: skip

    sent = [Event("update", f"https://o.test/{u}", NOW, {"i": i}, key="k")
            for i, u in enumerate(["a", "b", "a"])]  # fmt: skip
    ingest.publish("orders", "pub", sent, NOW)
    assert queued() == [("b", {"i": 1}), ("a", {"i": 2})]
    plain = [Event("update", f"https://o.test/{u}", NOW, {"i": i})
             for i, u in enumerate(["c", "d", "c"], start=3)]  # fmt: skip
    ingest.publish("orders", "pub", plain, NOW)
    assert queued()[2:] == [("c", {"i": 5}), ("d", {"i": 4})]  # in place: its own key
