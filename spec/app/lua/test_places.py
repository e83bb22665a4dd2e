"""Places in flight (app/lua/lib/places.lua) on the real server: a subscriber of
concurrency 2 (8 partitions) whose two places are taken; when one frees, the partition
with the larger backlog goes first, ahead of one that began to wait earlier, and a
partition that has waited long enough goes ahead of any backlog. A change of concurrency
that adds places wakes those waiting. While the subscriber's circuit is open, one
partition at a time probes it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from app import codec
from app.delivery.flight import Flight
from app.models import partitions
from app.models.attempt_result import answered
from app.models.event import Event
from app.models.queue import JobQueue, promote_all
from app.models.subscribers import SubscriberStore
from spec.app.delivery.driven import Driven
from spec.app.services.test_ingest import NOW, ingest_for, subscribe

WORKERS = ["a.1.x/0", "a.1.x/1", "a.1.x/2"]


def distinct_keys(count: int, n: int) -> list[str]:
    """`count` keys that fall in different partitions of n."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < count:
        found.setdefault(partitions.partition_of(f"k{i}", n), f"k{i}")
        i += 1
    return list(found.values())


class Line:
    """One partitioned subscriber (max 1: a batch per event) and a clock the test sets."""

    def __init__(self, client, keys, scripts, settings) -> None:
        self.now = NOW
        self.client, self.keys = client, keys
        self.queues = [JobQueue(client, keys, scripts, "main", n) for n in range(keys.shards)]
        for queue in self.queues:
            for worker in WORKERS:
                client.hset(queue.place.workers, worker.split("/")[0], NOW * 10)
        self.delivery = Driven(client, keys, settings, clock=lambda: self.now)
        subscribe(SubscriberStore(client, keys, scripts), ["orders"], concurrency=2, max=1,
                  timeout=0)  # fmt: skip
        self.ingest = ingest_for(client, keys, scripts)

    def publish(self, key: str, n: int = 1) -> None:
        sent = [Event("update", f"https://o.test/{key}/{i}", self.now, None, key=key)
                for i in range(n)]  # fmt: skip
        self.ingest.publish("orders", "pub", sent, self.now)

    def take(self, worker: str) -> Flight | None:
        """What the worker's sweep begins: a flight, or None (a partition that went to
        wait in line for a place, or nothing due)."""
        taken = self.delivery.take(self.queues, worker)
        return taken.flight if taken is not None and isinstance(taken.flight, Flight) else None

    def begin_all(self, worker: str) -> list[Flight]:
        """Sweep until nothing is due (the clock's due jobs promoted first): the flights
        begun."""
        promote_all(self.queues, self.now)
        begun = []
        while (taken := self.delivery.take(self.queues, worker)) is not None:
            if isinstance(taken.flight, Flight):
                begun.append(taken.flight)
        return begun

    def take_all(self, worker: str) -> list[str]:
        """begin_all(): the keys of the flights begun."""
        return [key_of(f) for f in self.begin_all(worker)]

    def ack(self, flight: Flight) -> None:
        assert self.delivery.finish(flight, answered(200)).kind == "delivered"


def key_of(flight: Flight) -> str:
    return str(codec.unpack_entry(flight.entries[0]).key)


@pytest.fixture
def line(redis_client, keys, scripts, settings) -> Iterator[Line]:
    made = Line(redis_client, keys, scripts, settings)
    yield made
    made.delivery.close()


def test_a_freed_place_goes_to_the_larger_backlog_first(line: Line):
    a, b, light, heavy = distinct_keys(4, partitions.count(2))
    line.publish(a)
    line.publish(b)
    first, second = line.take(WORKERS[0]), line.take(WORKERS[1])
    assert first and second and {key_of(first), key_of(second)} == {a, b}  # both places
    line.publish(light)
    assert line.take_all(WORKERS[2]) == []  # in line first (no place free), one batch
    line.now += 100
    line.publish(heavy, 8)
    assert line.take_all(WORKERS[2]) == []  # in line 100 ms later, eight batches
    line.ack(first)
    assert line.take_all(WORKERS[2]) == [heavy]  # 250 ms x (log2(9) - 1) ahead, less 100
    line.ack(second)
    assert line.take_all(WORKERS[2]) == [light]  # the next place: nobody else waits


def test_waiting_long_enough_goes_ahead_of_any_backlog(line: Line):
    a, b, light, heavy = distinct_keys(4, partitions.count(2))
    line.publish(a)
    line.publish(b)
    first, second = line.take(WORKERS[0]), line.take(WORKERS[1])
    assert first and second
    line.publish(light)
    assert line.take_all(WORKERS[2]) == []
    line.now += 1_000  # longer than the heavy partition's bonus over it (542 ms)
    line.publish(heavy, 8)
    assert line.take_all(WORKERS[2]) == []
    line.ack(first)
    assert line.take_all(WORKERS[2]) == [light]


def test_a_partition_that_finishes_competes_for_its_place(line: Line):
    """The one that waited goes before the one whose delivery just ended, when both have
    as much queued: the place is not kept by whoever had it."""
    a, b, c = distinct_keys(3, partitions.count(2))
    line.publish(a, 2)
    line.publish(b)
    first, second = line.take(WORKERS[0]), line.take(WORKERS[1])
    assert first and second and key_of(first) == a
    line.publish(c)
    assert line.take_all(WORKERS[2]) == []  # c waits: both places taken
    line.now += 10
    outcome, after = line.delivery.finish_and_next(first, answered(200), go_on=True)
    assert outcome.kind == "delivered" and not isinstance(after, Flight)  # a waits now
    assert line.take_all(WORKERS[2]) == [c]
    line.ack(second)
    assert line.take_all(WORKERS[2]) == [a]


@pytest.mark.parametrize("through", [[3], [1, 3]], ids=["2-3", "2-1-3"])
def test_a_change_that_adds_places_wakes_the_partitions_waiting(
    line: Line, scripts, through: list[int]
):
    """The keys state machine's `a_free_place_is_never_left_while_a_partition_waits`
    failed on this: subscribe.lua raised `concurrency` while partitions waited in line
    without their jobs (lib/places.lua), and nobody made them due, so the places it added
    stood free until a delivery in flight ended (for ever, had none been in flight). The
    old layout drains with the new count of places, the one that waited first."""
    a, b, c = distinct_keys(3, partitions.count(2))
    line.publish(a)
    line.publish(b)
    first, second = line.take(WORKERS[0]), line.take(WORKERS[1])
    assert first and second
    line.publish(c)
    assert line.take_all(WORKERS[2]) == []  # both places taken: c waits in line
    store = SubscriberStore(line.client, line.keys, scripts)
    for concurrency in through:  # 1 on the way: still no place free (two in flight)
        subscribe(store, ["orders"], concurrency=concurrency, max=1, timeout=0)
    assert line.take_all(WORKERS[2]) == [c]  # the third place, at once
    line.ack(first)
    line.ack(second)


def test_an_open_circuit_is_probed_by_one_partition_at_a_time(
    redis_client, keys, scripts, settings
):
    """Every key failing opens the subscriber's circuit; the partitions then wait for its
    probe, one of them takes it (the next is an interval away for the others), and the
    probe's success ends the others' wait at once."""
    down = replace(settings, circuit_failures=3, circuit_probe_ms=10_000, retry_lone_ms=1,
                   circuit_outage_ms=0,
                   retry_first_ms=1)  # fmt: skip
    line = Line(redis_client, keys, scripts, down)
    for key in distinct_keys(4, partitions.count(2)):
        line.publish(key)
    for _ in range(3):  # three failures in a row, across partitions: the circuit opens
        flight = line.take(WORKERS[0])
        assert flight is not None
        assert line.delivery.finish(flight, answered(500)).kind == "failed"
        line.now += 5  # past each partition's own backoff (1-2 ms)
    assert redis_client.hexists(keys.subscriber("sub"), "circuit_at")
    probe_at = int(redis_client.hget(keys.subscriber("sub"), "next_attempt_at"))
    assert line.now + 9_900 <= probe_at <= line.now + 15_000
    assert line.take_all(WORKERS[1]) == []  # nobody probes before the probe is due
    line.now = probe_at
    (probe,) = line.begin_all(WORKERS[1])  # one probe, not four
    assert line.delivery.finish(probe, answered(500)).kind == "failed"
    line.now = int(redis_client.hget(keys.subscriber("sub"), "next_attempt_at"))
    (probe,) = line.begin_all(WORKERS[1])
    line.ack(probe)  # the endpoint is back: the circuit closes, the rest go at once
    assert not redis_client.hexists(keys.subscriber("sub"), "circuit_at")
    assert len(line.take_all(WORKERS[2])) == 2  # both places, no probe's wait left
