"""Broker flights that gather a lane's ready batches (lib/delivery.lua's gather), run by
the engine's own steps (spec/app/delivery/driven.py) on a real Redis into a real
nats-server: at `max: 1` one flight carries several batches, each acknowledged with an
attempt of its own; a broker that refuses part way has the batches it confirmed whole
acknowledged, the next one failed and the rest given back untried; and while batches
are in such a flight, nothing else of the bus (coalescing, Expire) touches them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import DiscardPolicy, StreamConfig

from app.delivery.broker_messages import Published, Stop, messages
from app.delivery.callback import tls_context
from app.delivery.destinations import flight_stop
from app.delivery.dialer import Dialer
from app.delivery.flight import Flight, Gathered
from app.delivery.nats_publisher import NatsPublisher
from app.lua import Scripts
from app.models.attempt_result import CONFIRMED
from app.models.attempts import queued_batch
from app.models.destination import opened
from app.models.subscription import parse_subscription
from app.services.sealed_headers import sealer_of
from app.services.shedding import Shedding
from spec.app.delivery.delivery_bench import JOB, WORKER, Bench
from spec.nats_server import NatsServer, nats_server

STREAM = "ORDERS"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[NatsServer]:
    with nats_server(tmp_path) as server:
        yield server


@pytest.fixture
def benches() -> Iterator[list[Bench]]:
    """The tests' rigs, each closed after: its engine's broker connections with it."""
    made: list[Bench] = []
    yield made
    for bench in made:
        bench.delivery.close()


def on_stream(server: NatsServer, call: Callable[[Any], Any]) -> Any:
    async def work() -> Any:
        client = await nats.connect(server.url)
        try:
            return await call(client.jetstream())
        finally:
            await client.close()

    return asyncio.run(work())


def stream(server: NatsServer, max_msgs: int = -1) -> None:
    """The stream that captures `orders.>`; with `max_msgs`, it refuses more (discard
    new): a broker that stops taking messages part way through a flight."""
    config = StreamConfig(name=STREAM, subjects=["orders.>"], max_msgs=max_msgs,
                          discard=DiscardPolicy.NEW)  # fmt: skip
    on_stream(server, lambda js: js.add_stream(config))


def widen(server: NatsServer) -> None:
    config = StreamConfig(name=STREAM, subjects=["orders.>"], max_msgs=-1)
    on_stream(server, lambda js: js.update_stream(config))


def stored_urls(server: NatsServer) -> list[str]:
    async def read(js: Any) -> list[str]:
        count = (await js.stream_info(STREAM)).state.messages
        found = []
        for seq in range(1, count + 1):
            message = await js.get_msg(STREAM, seq)
            found.append(json.loads(message.data)["url"])
        return found

    return on_stream(server, read)  # type: ignore[no-any-return]


def subscribed(bench: Bench, server: NatsServer, **extra: Any) -> None:
    """`max: 1`, every event a batch; its route coalescing."""
    body = {"topics": [{"topic": "orders", "coalesce": True}], "max": 1, "timeout": 0,
            "destination": {"type": "nats", "url": server.url, "subject": "orders.all"},
            **extra}  # fmt: skip
    subscription = parse_subscription(body, allow_http=True, policy=bench.policy)
    assert subscription.destination is not None
    stored = subscription.destination.stored(sealer_of(bench.settings), "sub", bench.clock())
    bench.store.subscribe("sub", subscription, bench.clock(), destination=stored)


def attempts(bench: Bench) -> list[tuple[str, str, str]]:
    """The attempt log, oldest first: (batch, attempt, status) each."""
    entries = bench.client.xrange(bench.keys.attempts("sub"))
    return [(f[b"batch"].decode(), f[b"attempt"].decode(), f[b"status"].decode())
            for _, f in entries]  # fmt: skip


def begun(bench: Bench) -> Flight:
    bench.take()
    flight = bench.delivery.begin("sub", WORKER, JOB)
    assert isinstance(flight, Flight)
    return flight


def five_in_one_flight(
    bench: Bench, broker: NatsServer, benches: list[Bench]
) -> tuple[Bench, Flight, list[str]]:
    """Five events to a `max: 1` subscriber, begun as one flight: the flight, and its
    batches' ids in order."""
    benches.append(bench)
    subscribed(bench, broker)
    bench.publish(5)
    flight = begun(bench)
    return bench, flight, [flight.batch_id.decode(), *(g.batch_id.decode() for g in flight.more)]


def urls(n: int, start: int = 0) -> list[str]:
    return [f"https://o.test/{i}" for i in range(start, start + n)]


def test_one_flight_carries_the_ready_batches_each_acknowledged_with_its_attempt(
    redis_client, keys, scripts: Scripts, broker: NatsServer, benches: list[Bench]
):
    stream(broker)
    bench = Bench(redis_client, keys, scripts, delivery_log=True)
    benches.append(bench)
    subscribed(bench, broker, topics=[{"topic": "orders", "coalesce": True, "ttl": 1}])
    bench.publish(5)
    flight = begun(bench)
    assert len(flight.more) == 4 and len(flight.every_entry) == 5
    ids = [flight.batch_id.decode(), *(g.batch_id.decode() for g in flight.more)]
    assert all(queued_batch(redis_client, keys, "sub", i)["in_flight"] for i in ids)
    shedding = Shedding(redis_client, keys, scripts, bench.settings)
    assert shedding.expire(bench.clock() + 2000, entire=True) == 0, "none in flight expires"
    # a newer state of a url whose batch is in flight is not merged into it (the ack
    # deletes that batch): it queues behind, and goes in the next flight
    bench.clock.advance(5)
    bench.publish(1, start=3)
    outcome = bench.delivery.finish(flight, bench.delivery.send(flight))
    assert (outcome.kind, outcome.events) == ("delivered", 5)
    assert attempts(bench) == [(i, "1", "confirmed") for i in ids]
    assert len(redis_client.xrange(keys.home("sub").base + "deliveries")) == 5
    assert int(bench.field("sent")) == 5
    assert bench.run().kind == "delivered"
    assert stored_urls(broker) == [*urls(5), "https://o.test/3"]


def test_a_broker_refusing_part_way_acknowledges_what_it_confirmed_and_fails_the_next(
    redis_client, keys, scripts: Scripts, broker: NatsServer, benches: list[Bench]
):
    stream(broker, max_msgs=3)
    bench, flight, ids = five_in_one_flight(Bench(redis_client, keys, scripts), broker, benches)
    assert len(ids) == 5
    outcome = bench.delivery.finish(flight, bench.delivery.send(flight))
    assert outcome.kind == "failed"
    log = attempts(bench)
    assert log[:3] == [(i, "1", "confirmed") for i in ids[:3]]
    assert [(b, n) for b, n, _ in log[3:]] == [(ids[3], "1")], "the rest were never tried"
    assert log[3][2] != "confirmed"
    assert int(bench.field("sent")) == 3
    assert int(redis_client.hget(keys.home("sub").event_gauge, "sub")) == 2
    assert bench.field("streak") == "1", "the failure after the confirmed ones is the first"
    widen(broker)
    bench.clock.advance(120_000)
    assert bench.run().kind == "delivered"
    assert [(b, n, s) for b, n, s in attempts(bench)[4:]] == [
        (ids[3], "2", "confirmed"), (ids[4], "1", "confirmed"),
    ]  # fmt: skip
    assert stored_urls(broker) == urls(5), "in order, none twice"


def test_a_subscription_with_transforms_gathers_nothing(
    redis_client, keys, scripts: Scripts, broker: NatsServer, benches: list[Bench]
):
    stream(broker)
    bench = Bench(redis_client, keys, scripts)
    benches.append(bench)
    subscribed(bench, broker, topics=[{"topic": "orders", "transform": "$"}])
    bench.publish(3)
    flight = begun(bench)
    assert flight.more == () and len(flight.every_entry) == 1


def test_a_flight_that_stopped_early_acknowledges_what_went_and_leaves_the_rest_untried(
    redis_client, keys, scripts: Scripts, broker: NatsServer, benches: list[Bench]
):
    """A slow broker: the flight stopped at a gathered batch once half of BUSBAR_TIMEOUT
    had passed (Stop); what the broker confirmed is acknowledged, the rest goes in the
    next flight, with no failed attempt on any."""
    stream(broker)
    bench, flight, ids = five_in_one_flight(Bench(redis_client, keys, scripts), broker, benches)
    destination = opened(flight.destination, sealer_of(bench.settings), "sub")
    batch = messages(flight, destination)

    async def three() -> Published:  # its time already up at the fourth batch
        publisher = NatsPublisher(Dialer(bench.policy, tls_context(True), 2.0),
                                  lambda: tls_context(True), 3.0, 2.0)  # fmt: skip
        try:
            return await publisher.publish(destination, batch, "sub", Stop(0.0, frozenset({3})))
        finally:
            await publisher.close()

    published = asyncio.run(three())
    assert (published.result, published.confirmed) == (CONFIRMED, 3)
    assert published.note == "3 of 5 confirmed; the rest in a flight of its own"
    flight.confirmed[:] = [published.confirmed]
    outcome = bench.delivery.finish(flight, published.result)
    assert outcome.kind == "delivered"
    assert attempts(bench) == [(i, "1", "confirmed") for i in ids[:3]]
    assert int(bench.field("sent")) == 3 and bench.field("streak") is None
    assert int(redis_client.hget(keys.home("sub").event_gauge, "sub")) == 2
    assert bench.run().kind == "delivered"
    assert attempts(bench)[3:] == [(i, "1", "confirmed") for i in ids[3:]]
    assert stored_urls(broker) == urls(5), "in order, none twice"


def test_a_flight_may_stop_only_where_a_gathered_batch_begins():
    more = (Gathered(b"2", 0, 0, [b"b", b"c"]), Gathered(b"3", 0, 0, [b"d"]))
    flight = Flight("sub", "w", b"J", b"1", "N", 0.0, "", "", "c", [b"a"], more=more)
    assert len(flight.every_entry) == 4
    stop = flight_stop(flight, 20.0)
    assert stop is not None and stop.at == frozenset({1, 3})
    assert not stop.now(0) and not stop.now(2)
    assert flight_stop(replace(flight, more=()), 20.0) is None
