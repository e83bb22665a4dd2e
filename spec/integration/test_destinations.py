"""A subscription's `destination` from outside: real `busbar web` and `busbar worker`, a
real nats-server with JetStream, on one Redis and on a cluster (docs/destinations.md).

Events reach the stream one message per event, each once, in order per key at
`concurrency` 4, with their ids as `Nats-Msg-Id`; the password is never listed or
logged; the test call checks the broker and the stream and publishes nothing. A broker
killed and restarted loses nothing; pause holds events back; a subject no stream
captures is a failed attempt (`no_stream`) that goes to the dead letters, which replay
into the stream once it exists; a refused password is `auth_failed`."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aio_pika
import nats
import pytest
from busbar_client import Busbar, Route
from nats.js.api import DiscardPolicy, StreamConfig

from spec.conftest import ROOT_KEY
from spec.integration.bus import Bus, bus
from spec.integration.processes import wait_until
from spec.nats_server import NatsServer, nats_server
from spec.rabbitmq_server import RabbitMq, rabbitmq_server

SECRET = "broker-pass-never-shown"
# retries within a second, and a circuit that an outage opens probed every second (a
# RabbitMQ restart takes about 6 s: past BUSBAR_CIRCUIT_OUTAGE_MS, the circuit opens)
QUICK = {"BUSBAR_RETRY_FIRST_MS": "200", "BUSBAR_RETRY_LONE_MS": "200",
         "BUSBAR_MAX_BACKOFF_MS": "500", "BUSBAR_TIMEOUT": "2",
         "BUSBAR_CONNECT_TIMEOUT": "1", "BUSBAR_CIRCUIT_PROBE_MS": "1000"}  # fmt: skip


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[NatsServer]:
    with nats_server(tmp_path, auth=("busbar", SECRET)) as server:
        yield server


def broker_call(server: NatsServer, work: Any) -> Any:
    async def run() -> Any:
        client = await nats.connect(server.url, user="busbar", password=SECRET)
        try:
            return await work(client.jetstream())
        finally:
            await client.close()

    return asyncio.run(run())


def add_stream(server: NatsServer, name: str = "ORDERS", subjects: str = "orders.>") -> None:
    broker_call(server, lambda js: js.add_stream(name=name, subjects=[subjects]))


def stored(server: NatsServer, stream: str = "ORDERS") -> list[dict[str, Any]]:
    async def read(js: Any) -> list[dict[str, Any]]:
        info = await js.stream_info(stream)
        found = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            if not info.state.messages:
                break
            raw = await js.get_msg(stream, seq)
            found.append({**json.loads(raw.data), "subject": raw.subject,
                          "msg_id": (raw.headers or {}).get("Nats-Msg-Id")})  # fmt: skip
        return found

    return broker_call(server, read)


def destination(server: NatsServer, **more: Any) -> dict[str, Any]:
    return {"type": "nats", "url": server.url, "subject": "orders.{type}.{key}",
            "user": "busbar", "password": SECRET, **more}  # fmt: skip


def subscribe(b: Bus, name: str, to: dict[str, Any], **extra: Any) -> None:
    b.client(name)
    body = {"topics": ["orders"], "destination": to, **extra}
    answer = b.call("POST", "/subscription", name, body)
    assert answer.status_code == 204, answer.text


def keyed(n: int, keys: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"type": "create", "url": f"https://o.test/{i}", "data": {"i": i},
             "key": f"k{i % keys}"} for i in range(start, start + n)]  # fmt: skip


def failed_twice(b: Bus, name: str) -> None:
    """Wait for two attempts that failed (the broker down), from the listing's counts."""

    def failed() -> bool:
        attempts = b.subscription(name)["attempts"]
        return attempts["connection"] + attempts["timeout"] >= 2

    wait_until(failed, 30, "attempts that failed while the broker was down")


def test_events_reach_the_stream_once_in_order_per_key_and_the_password_stays_sealed(
    redis_url: str, tmp_path: Path, broker: NatsServer
):
    add_stream(broker)
    with bus(redis_url, tmp_path, **QUICK) as b:
        subscribe(b, "orders-stream", destination(broker, stream="ORDERS"),
                  concurrency=4, max=10, timeout=0)  # fmt: skip
        tried = b.call("POST", "/subscription/test", "orders-stream").json()
        assert tried["status"] == 200 and "stream ORDERS captures" in tried["body"], tried
        assert stored(broker) == []  # the test call published nothing
        for start in range(0, 200, 50):
            b.publish("orders-stream", "orders", keyed(50, 8, start))
        wait_until(lambda: len(stored(broker)) >= 200, 60, "200 messages in the stream")
        held = stored(broker)
        assert len(held) == 200  # each once
        assert [m["msg_id"] for m in held] == [m["id"] for m in held]
        for k in range(8):
            mine = [m["data"]["i"] for m in held if m["key"] == f"k{k}"]
            assert mine == list(range(k, 200, 8)), f"k{k} out of order"
        assert {m["subject"] for m in held} == {f"orders.create.k{k}" for k in range(8)}
        # the stream has the last batches before the worker has their confirmations
        sent = lambda: b.subscription("orders-stream")["events"]["sent"]  # noqa: E731
        wait_until(lambda: sent() == 200, 30, "every confirmation acknowledged")
        listed = b.subscription("orders-stream")
        assert listed["destination"]["password"]["secret"] is True
        assert listed["destination"]["url"] == broker.url
        assert listed["events"]["sent"] == 200
        assert listed["attempts"]["2xx"] >= 20 and listed["attempts"]["connection"] == 0
        # a broker's confirmation is a success in the attempt log too, with its note
        path = "/subscriber/attempts?outcome={}&limit=5"
        ok = b.call("GET", path.format("2xx"), "orders-stream").json()["attempts"]
        assert ok and all(e["outcome"] == "2xx" for e in ok), ok
        assert b.call("GET", path.format("connection"), "orders-stream").json()["attempts"] == []
        assert SECRET not in json.dumps(listed)
        assert SECRET not in json.dumps(b.call("GET", "/subscriptions", ROOT_KEY).json())
    for log in tmp_path.glob("*.log"):
        assert SECRET not in log.read_text(errors="replace"), log.name


def test_at_max_1_a_stream_that_fills_part_way_through_flights_loses_and_repeats_nothing(
    redis_url: str, tmp_path: Path, broker: NatsServer
):
    """`max: 1` at `concurrency` 4: a flight carries many one-event batches (docs/
    destinations.md, Flights of several batches). The stream takes 150 messages, then
    refuses (discard new) until it is widened: the batches confirmed before a refusal
    are acknowledged with the flight, the rest tried again, so each event is stored
    once, each key in order, and every batch has exactly one confirmed attempt."""
    full = StreamConfig(name="ORDERS", subjects=["orders.>"], max_msgs=150,
                        discard=DiscardPolicy.NEW)  # fmt: skip
    broker_call(broker, lambda js: js.add_stream(full))
    with bus(redis_url, tmp_path, **QUICK) as b:
        subscribe(b, "one-by-one", destination(broker), concurrency=4, max=1, timeout=0)
        assert b.call("POST", "/subscriber/pause", "one-by-one").status_code == 200
        for start in range(0, 300, 100):
            b.publish("one-by-one", "orders", keyed(100, 8, start))
        assert b.call("POST", "/subscriber/resume", "one-by-one").status_code == 200
        refused = lambda: b.subscription("one-by-one")["attempts"]["connection"]  # noqa: E731
        wait_until(lambda: refused() >= 2, 30, "the full stream refusing messages")
        assert len(stored(broker)) == 150
        wide = StreamConfig(name="ORDERS", subjects=["orders.>"], max_msgs=-1)
        broker_call(broker, lambda js: js.update_stream(wide))
        sent = lambda: b.subscription("one-by-one")["events"]["sent"]  # noqa: E731
        wait_until(lambda: sent() == 300, 60, "every event acknowledged")
        held = stored(broker)
        assert len(held) == 300 and len({m["msg_id"] for m in held}) == 300
        for k in range(8):
            mine = [m["data"]["i"] for m in held if m["key"] == f"k{k}"]
            assert mine == list(range(k, 300, 8)), f"k{k} out of order"
        listed = b.subscription("one-by-one")
        assert listed["attempts"]["2xx"] == 300, listed["attempts"]
        assert listed["events"]["queued"] == 0


def test_a_broker_killed_then_back_loses_nothing_and_pause_holds_events(
    redis_url: str, tmp_path: Path, broker: NatsServer
):
    add_stream(broker)
    with bus(redis_url, tmp_path, **QUICK) as b:
        subscribe(b, "resilient", destination(broker), max=5, timeout=0)
        b.publish("resilient", "orders", keyed(10, 2))
        wait_until(lambda: len(stored(broker)) == 10, 30, "the first 10")
        broker.kill()
        b.publish("resilient", "orders", keyed(10, 2, 10))

        failed_twice(b, "resilient")
        broker.start()  # the same port and store: an operator's restart
        wait_until(lambda: len(stored(broker)) == 20, 60, "all 20 once it is back")
        assert b.call("POST", "/subscriber/pause", "resilient").status_code == 200
        b.publish("resilient", "orders", keyed(5, 2, 20))
        b.job_settled("resilient")
        assert len(stored(broker)) == 20  # paused: nothing sent
        assert b.call("POST", "/subscriber/resume", "resilient").status_code == 200
        wait_until(lambda: len(stored(broker)) == 25, 30, "the 5 held while paused")
        held = stored(broker)
        for k in range(2):
            assert [m["data"]["i"] for m in held if m["key"] == f"k{k}"] == list(range(k, 25, 2))
        assert len({m["id"] for m in held}) == 25


def test_no_stream_goes_to_the_dead_letters_which_replay_into_the_stream(
    redis_url: str, tmp_path: Path, broker: NatsServer
):
    with bus(redis_url, tmp_path, **QUICK) as b:
        subscribe(b, "early", destination(broker), max_attempts=1, timeout=0)
        tried = b.call("POST", "/subscription/test", "early").json()
        assert tried["status"] is None and tried["reason"] == "no_stream", tried
        b.publish("early", "orders", keyed(3, 1))

        def dead() -> list[dict[str, Any]]:
            return b.call("GET", "/subscriber/deadletters", "early").json()

        wait_until(lambda: len(dead()) == 3, 30, "3 dead letters")
        assert {d["last_status"] for d in dead()} == {"no_stream"}
        add_stream(broker)
        assert b.call("POST", "/subscriber/deadletters/replay", "early").status_code == 202
        wait_until(lambda: len(stored(broker)) == 3, 30, "the replayed 3")
        assert [m["data"]["i"] for m in stored(broker)] == [0, 1, 2]
        subscribe(b, "wrong-pass", destination(broker, password="not-it"), max_attempts=1)
        refused = b.call("POST", "/subscription/test", "wrong-pass").json()
        assert refused["reason"] == "auth_failed", refused


def test_a_routes_filter_and_transform_shape_what_the_stream_receives(
    redis_url: str, tmp_path: Path, broker: NatsServer
):
    add_stream(broker)
    with bus(redis_url, tmp_path, **QUICK) as b:
        route = Route("orders", filter={"data.i": {"$gte": 2}},
                      transform='{"n": data.i, "text": "order " & $string(data.i)}')  # fmt: skip
        # through the Python client, as a service would subscribe itself
        Busbar(b.base, b.client("shaped")).subscribe(
            None, [route], timeout=0, destination=destination(broker)
        )
        b.publish("shaped", "orders", keyed(5, 1))
        wait_until(lambda: len(stored(broker)) == 3, 30, "the 3 the filter takes")
        assert [m["data"] for m in stored(broker)] == [
            {"n": i, "text": f"order {i}"} for i in (2, 3, 4)
        ]
        assert b.subscription("shaped")["events"]["filtered"] == 2


# RabbitMQ: one broker for these tests (about 6 s to start), each test its own exchange
RABBIT_SECRET = "rabbit-pass-never-shown"


@pytest.fixture(scope="module")
def rabbit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitMq]:
    with rabbitmq_server(tmp_path_factory.mktemp("rabbitmq")) as server:
        server.add_user("busbar", RABBIT_SECRET)
        yield server


def rabbit_to(server: RabbitMq, exchange: str, **more: Any) -> dict[str, Any]:
    return {"type": "rabbitmq", "url": server.url.rstrip("/"), "exchange": exchange,
            "routing_key": "orders.{type}.{key}", "user": "busbar",
            "password": RABBIT_SECRET, **more}  # fmt: skip


def rabbit_call(server: RabbitMq, work: Any) -> Any:
    async def run() -> Any:
        connection = await aio_pika.connect(server.url)
        try:
            return await work(await connection.channel())
        finally:
            await connection.close()

    return asyncio.run(run())


def bound_queue(server: RabbitMq, exchange: str, queue: str, key: str = "orders.#") -> None:
    async def bind(channel: Any) -> None:
        found = await channel.declare_exchange(exchange, aio_pika.ExchangeType.TOPIC,
                                               durable=True)  # fmt: skip
        await (await channel.declare_queue(queue, durable=True)).bind(found, key)

    rabbit_call(server, bind)


def queued(server: RabbitMq, queue: str) -> list[dict[str, Any]]:
    """Every message the queue holds, taken from it, in order."""

    async def take(channel: Any) -> list[dict[str, Any]]:
        declared = await channel.declare_queue(queue, durable=True)
        found = []
        while (message := await declared.get(no_ack=True, fail=False)) is not None:
            found.append({**json.loads(message.body), "message_id": message.message_id,
                          "routing_key": message.routing_key})  # fmt: skip
        return found

    return rabbit_call(server, take)


def collected(server: RabbitMq, queue: str, n: int) -> list[dict[str, Any]]:
    """The queue's messages, taken until at least `n` came (then a moment for more)."""
    held: list[dict[str, Any]] = []

    def enough() -> bool:
        held.extend(queued(server, queue))
        return len(held) >= n

    wait_until(enough, 60, f"{n} messages in {queue}")
    time.sleep(0.5)  # a repeat would come right behind: taken too, and counted
    return held + queued(server, queue)


@pytest.mark.xdist_group("rabbitmq")
def test_rabbitmq_events_reach_a_bound_queue_in_order_per_key_and_the_password_stays_sealed(
    redis_url: str, tmp_path: Path, rabbit: RabbitMq
):
    exchange = f"orders-{tmp_path.name}"
    bound_queue(rabbit, exchange, f"billing-{tmp_path.name}")
    with bus(redis_url, tmp_path, **QUICK) as b:
        subscribe(b, "to-rabbit", rabbit_to(rabbit, exchange), concurrency=4, max=10,
                  timeout=0)  # fmt: skip
        tried = b.call("POST", "/subscription/test", "to-rabbit").json()
        assert tried["status"] == 200 and "exists" in tried["body"], tried
        for start in range(0, 120, 40):
            b.publish("to-rabbit", "orders", keyed(40, 6, start))
        held = collected(rabbit, f"billing-{tmp_path.name}", 120)
        assert len(held) == 120 and len({m["id"] for m in held}) == 120
        assert [m["message_id"] for m in held] == [m["id"] for m in held]
        for k in range(6):
            assert [m["data"]["i"] for m in held if m["key"] == f"k{k}"] == list(range(k, 120, 6))
        listed = b.subscription("to-rabbit")
        assert listed["destination"]["exchange"] == exchange
        assert listed["destination"]["password"]["secret"] is True
        assert RABBIT_SECRET not in json.dumps(listed)
    for log in tmp_path.glob("*.log"):
        assert RABBIT_SECRET not in log.read_text(errors="replace"), log.name


@pytest.mark.xdist_group("rabbitmq")
def test_rabbitmq_unroutable_goes_to_the_dead_letters_which_replay_once_a_queue_is_bound(
    redis_url: str, tmp_path: Path, rabbit: RabbitMq
):
    exchange = f"unbound-{tmp_path.name}"
    bound_queue(rabbit, exchange, f"elsewhere-{tmp_path.name}", key="nothing.matches")
    with bus(redis_url, tmp_path, **QUICK) as b:
        subscribe(b, "unbound", rabbit_to(rabbit, exchange), max_attempts=1, timeout=0)
        b.publish("unbound", "orders", keyed(3, 1))

        def dead() -> list[dict[str, Any]]:
            return b.call("GET", "/subscriber/deadletters", "unbound").json()

        wait_until(lambda: len(dead()) == 3, 30, "3 dead letters")
        assert {d["last_status"] for d in dead()} == {"unroutable"}
        bound_queue(rabbit, exchange, f"late-{tmp_path.name}")
        assert b.call("POST", "/subscriber/deadletters/replay", "unbound").status_code == 202
        held = collected(rabbit, f"late-{tmp_path.name}", 3)
        assert [m["data"]["i"] for m in held] == [0, 1, 2]
        subscribe(b, "no-exchange", rabbit_to(rabbit, "no-such-exchange"))
        missing = b.call("POST", "/subscription/test", "no-exchange").json()
        assert missing["status"] is None and missing["reason"] == "no_exchange", missing
        subscribe(b, "bad-pass", rabbit_to(rabbit, exchange, password="wrong"))
        refused = b.call("POST", "/subscription/test", "bad-pass").json()
        assert refused["reason"] == "auth_failed", refused


@pytest.mark.xdist_group("rabbitmq")
def test_rabbitmq_killed_then_back_loses_nothing_it_confirmed(
    redis_url: str, tmp_path: Path, rabbit: RabbitMq
):
    """RabbitMQ keeps no message ids: a batch whose confirm was lost with the broker is
    sent again whole, so an event may arrive twice; never zero times, and each key's
    first arrivals keep its order (docs/destinations.md)."""
    exchange, queue = f"restart-{tmp_path.name}", f"restart-q-{tmp_path.name}"
    bound_queue(rabbit, exchange, queue)
    with bus(redis_url, tmp_path, **QUICK) as b:
        subscribe(b, "outlasting", rabbit_to(rabbit, exchange), max=5, timeout=0)
        b.publish("outlasting", "orders", keyed(10, 2))
        held = collected(rabbit, queue, 10)
        rabbit.kill()
        b.publish("outlasting", "orders", keyed(10, 2, 10))

        failed_twice(b, "outlasting")
        rabbit.start()  # the same store: its users, the durable queue and what it held
        wait_until(lambda: b.subscription("outlasting")["events"]["sent"] >= 20, 60, "sent")
        held += collected(rabbit, queue, 0)
        first: dict[str, dict[str, Any]] = {}
        for m in held:
            first.setdefault(m["id"], m)
        assert len(first) == 20
        for k in range(2):
            mine = [m["data"]["i"] for m in first.values() if m["key"] == f"k{k}"]
            assert mine == list(range(k, 20, 2))
