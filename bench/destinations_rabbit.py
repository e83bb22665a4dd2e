"""RabbitMQ as bench.destinations measures it (a Target of bench.destinations_bus): a
throwaway node of Debian's rabbitmq-server as spec/rabbitmq_server.py runs one (its own
HOME, cookie, epmd port and store in a temporary folder, loopback only; the `guest`
user, which RabbitMQ admits from loopback), and this process's side of it: one event
loop and one connection, opened again after the node was restarted.

Measurement `n` has its own durable topic exchange `x<n>` and durable queue `q<n>`
bound to it by `orders.#`; its subscriber's destination publishes to `x<n>` with
routing key `orders.{type}.{key}`. When messages reached the queue is read from its
depth (bench.destinations_depth). The baseline publishes with aio-pika as the worker
does: a confirming channel, `mandatory`, persistent, the same `message_id`,
`content_type` and headers, each confirm awaited before the next message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractConnection

from bench.destinations_bus import MAX_1, MAX_100, Stored
from bench.destinations_depth import Depth
from spec.rabbitmq_server import RabbitMq

T = TypeVar("T")
KEY = "orders.{type}.{key}"


class Rabbit:
    name = "RabbitMQ"
    baseline = "aio-pika loop (baseline)"

    def __init__(self, node: RabbitMq) -> None:
        self.baselines = {MAX_1: self.baseline, MAX_100: self.baseline}  # one for both
        self.node = node
        self.loop = asyncio.new_event_loop()
        self.connection: AbstractConnection | None = None
        self.depths: dict[int, Depth] = {}

    def run(self, work: Callable[[AbstractChannel], Awaitable[T]], confirming: bool = False) -> T:
        return self.loop.run_until_complete(self._run(work, confirming))

    async def _run(self, work: Callable[[AbstractChannel], Awaitable[T]], confirming: bool) -> T:
        if self.connection is None or self.connection.is_closed:
            await self._drop()
            self.connection = await aio_pika.connect(self.node.url)
        channel = await self.connection.channel(
            publisher_confirms=confirming, on_return_raises=confirming
        )
        try:
            return await work(channel)
        finally:
            with contextlib.suppress(Exception):
                await channel.close()

    async def _drop(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            with contextlib.suppress(Exception):  # the broker may be gone
                await connection.close()

    def close(self) -> None:
        for depth in self.depths.values():
            depth.stop()
        self.loop.run_until_complete(self._drop())
        self.loop.close()

    def pid(self) -> int:  # the launcher; its tree (the Erlang VM) is counted
        assert self.node.process is not None
        return self.node.process.pid

    def fresh(self, n: int) -> None:
        async def declare(channel: AbstractChannel) -> None:
            exchange = await channel.declare_exchange(
                f"x{n}", aio_pika.ExchangeType.TOPIC, durable=True
            )
            await (await channel.declare_queue(f"q{n}", durable=True)).bind(exchange, "orders.#")

        self.run(declare)
        self.depths[n] = Depth(self.node.url, f"q{n}")

    def destination(self, n: int) -> dict[str, Any]:
        return {"type": "rabbitmq", "url": self.node.url.rstrip("/"), "exchange": f"x{n}",
                "routing_key": KEY}  # fmt: skip

    def remove(self, n: int) -> None:
        self.depths.pop(n).stop()

        async def delete(channel: AbstractChannel) -> None:
            await channel.queue_delete(f"q{n}")
            await channel.exchange_delete(f"x{n}")

        self.run(delete)

    def count(self, n: int) -> int:
        return self.depths[n].count

    def span(self, n: int, count: int) -> tuple[float, float]:
        """When the queue's depth was first read at 1, and at `count`."""
        return self.depths[n].reached(1), self.depths[n].reached(count)

    def read(self, n: int) -> list[Stored]:
        """Every message of the queue, in queue order, taken from it (the depth no
        longer watched)."""
        self.depths[n].stop()

        async def take(channel: AbstractChannel) -> list[Stored]:
            queue = await channel.declare_queue(f"q{n}", passive=True)
            total = queue.declaration_result.message_count or 0
            found: list[Stored] = []
            if not total:
                return found
            async with asyncio.timeout(120), queue.iterator(no_ack=True) as messages:
                async for m in messages:
                    headers = {k: v.decode() if isinstance(v, bytes) else str(v)
                               for k, v in (m.headers or {}).items()}  # fmt: skip
                    found.append(Stored(len(found), m.routing_key or "", m.message_id or "",
                                        m.body, 0.0, headers))  # fmt: skip
                    if len(found) >= total:
                        break
            return found

        return self.run(take)

    def publish_loop(self, n: int, messages: list[Stored], baseline: str = "") -> float:
        """The baseline: each message to x<n>, mandatory, persistent, its confirm awaited
        before the next, as the worker does. Returns this thread's CPU seconds (the
        depth's poller runs on another)."""
        del baseline  # one baseline: the worker sends one message at a time either way

        async def loop(channel: AbstractChannel) -> None:
            exchange = await channel.get_exchange(f"x{n}", ensure=True)
            for m in messages:
                await exchange.publish(
                    aio_pika.Message(
                        m.data, content_type="application/json", message_id=m.msg_id,
                        headers=dict(m.headers), delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                    ),
                    m.subject, mandatory=True, timeout=20,
                )  # fmt: skip

        began = time.thread_time()
        self.run(loop, confirming=True)
        return time.thread_time() - began

    def kill(self) -> None:
        self.loop.run_until_complete(self._drop())
        self.node.kill()

    def restart(self) -> None:
        """The same node, port and store: an operator's restart. kill() waits for the
        launcher only; the Erlang VM's listening socket is waited out first, or the
        dying VM's would be taken for the new node's."""
        wait_closed(self.node.port)
        self.node.start()

    def arrivals(self, n: int, held: list[Stored], since: float) -> tuple[float, float]:
        """When the depth first rose at or after `since`, and when it last rose."""
        del held  # RabbitMQ stamps no message
        rises = self.depths[n].rises
        return (self.depths[n].rises_since(since) or [since])[0], rises[-1]


@contextlib.contextmanager
def rabbit_broker(work: Path) -> Iterator[Rabbit]:
    """A RabbitMQ node with its store under `work`, and this process's side of it;
    the node killed and its epmd stopped on the way out, whatever happens."""
    for name in ("aiormq", "aio_pika"):  # a broker killed on purpose: no tracebacks
        logging.getLogger(name).setLevel(logging.CRITICAL)
    node = RabbitMq(work / "rabbitmq")
    try:
        node.start()
        with contextlib.closing(Rabbit(node)) as broker:
            yield broker
    finally:
        node.kill()
        stop_epmd(node)


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
    except OSError:
        return False
    return True


def wait_closed(port: int, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while listening(port) and time.monotonic() < deadline:
        time.sleep(0.05)


def stop_epmd(node: RabbitMq) -> None:
    """epmd refuses `epmd -kill` while a node is registered, and the killed VM is
    registered until it is gone (RabbitMq.kill() waits for its launcher only): asked
    again until it has stopped."""
    deadline = time.monotonic() + 10
    while listening(node.epmd_port) and time.monotonic() < deadline:
        node.stop_epmd()
        time.sleep(0.1)
