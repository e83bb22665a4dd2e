"""The brokers' side of the destination matrix (spec/integration/destination_matrix.py):
for each kind, a real broker (nats-server with JetStream, a RabbitMQ node, moto's SQS),
where one subscription's messages go (a stream, an exchange and its bound queue, a FIFO
queue, each its own), how to leave that place missing so every attempt fails (no
stream, no queue bound, no queue) and mend it, and what it holds, read as a consumer
reads it (RabbitMQ and SQS hand each message once: what was read is kept)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Protocol

import aio_pika
import nats

from spec.nats_server import NatsServer, nats_server
from spec.rabbitmq_server import RabbitMq, rabbitmq_server
from spec.sqs_server import REGION, SqsServer, sqs_server

SECRET = "matrix-broker-secret-never-shown"


class Side(Protocol):
    port: int  # where the broker listens (a cut forwarder goes in front of it)

    def make(self, name: str, ready: bool) -> None: ...  # ready False: every attempt fails
    def mend(self, name: str) -> None: ...
    def destination(self, name: str, port: int) -> dict[str, Any]: ...
    def read(self, name: str) -> list[dict[str, Any]]: ...  # every message so far, in order


class NatsSide:
    def __init__(self, server: NatsServer) -> None:
        self.server, self.port = server, server.port

    def _call(self, work: Any) -> Any:
        async def run() -> Any:
            client = await nats.connect(self.server.url, user="busbar", password=SECRET)
            try:
                return await work(client.jetstream())
            finally:
                await client.close()

        return asyncio.run(run())

    def make(self, name: str, ready: bool) -> None:
        if ready:
            self.mend(name)

    def mend(self, name: str) -> None:
        self._call(lambda js: js.add_stream(name=name.upper(), subjects=[f"dm.{name}.>"]))

    def destination(self, name: str, port: int) -> dict[str, Any]:
        return {"type": "nats", "url": f"nats://127.0.0.1:{port}", "stream": name.upper(),
                "subject": f"dm.{name}.{{type}}.{{key}}", "user": "busbar",
                "password": SECRET}  # fmt: skip

    def read(self, name: str) -> list[dict[str, Any]]:
        async def read(js: Any) -> list[dict[str, Any]]:
            info = await js.stream_info(name.upper())
            found = []
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                if info.state.messages:
                    raw = await js.get_msg(name.upper(), seq)
                    found.append({**json.loads(raw.data), "dedup": raw.headers["Nats-Msg-Id"]})
            return found

        return list(self._call(read))


class RabbitSide:
    def __init__(self, server: RabbitMq) -> None:
        self.server, self.port = server, server.port
        self.held: dict[str, list[dict[str, Any]]] = {}

    def _call(self, work: Any) -> Any:
        async def run() -> Any:
            connection = await aio_pika.connect(self.server.url)
            try:
                return await work(await connection.channel())
            finally:
                await connection.close()

        return asyncio.run(run())

    def _bind(self, name: str, key: str) -> None:
        async def bind(channel: Any) -> None:
            exchange = await channel.declare_exchange(name, aio_pika.ExchangeType.TOPIC)
            await (await channel.declare_queue(f"q-{name}", durable=True)).bind(exchange, key)

        self._call(bind)

    def make(self, name: str, ready: bool) -> None:
        self._bind(name, "#" if ready else "nothing.matches")  # else unroutable

    def mend(self, name: str) -> None:
        self._bind(name, "#")

    def destination(self, name: str, port: int) -> dict[str, Any]:
        return {"type": "rabbitmq", "url": f"amqp://127.0.0.1:{port}", "exchange": name,
                "routing_key": "{type}.{key}", "user": "busbar", "password": SECRET}  # fmt: skip

    def read(self, name: str) -> list[dict[str, Any]]:
        async def take(channel: Any) -> list[dict[str, Any]]:
            queue = await channel.declare_queue(f"q-{name}", durable=True)
            found = []
            while (message := await queue.get(no_ack=True, fail=False)) is not None:
                found.append({**json.loads(message.body), "dedup": message.message_id})
            return found

        held = self.held.setdefault(name, [])
        held += self._call(take)
        return list(held)


class SqsSide:
    def __init__(self, server: SqsServer) -> None:
        self.server, self.port = server, server.port
        self.held: dict[str, list[dict[str, Any]]] = {}

    def make(self, name: str, ready: bool) -> None:
        if ready:
            self.mend(name)

    def mend(self, name: str) -> None:
        self.server.queue(f"{name}.fifo")

    def destination(self, name: str, port: int) -> dict[str, Any]:
        return {"type": "sqs", "queue_url": f"{self.server.url}/123456789012/{name}.fifo",
                "region": REGION, "endpoint": f"http://127.0.0.1:{port}",
                "access_key_id": self.server.key[0],
                "secret_access_key": self.server.key[1]}  # fmt: skip

    def read(self, name: str) -> list[dict[str, Any]]:
        held = self.held.setdefault(name, [])
        try:
            got = self.server.received(f"{self.server.url}/123456789012/{name}.fifo")
        except Exception:  # the queue not made yet: nothing in it
            got = []
        held += [{**json.loads(m["Body"]), "dedup": m["Attributes"]["MessageDeduplicationId"],
                  "group": m["Attributes"]["MessageGroupId"]} for m in got]  # fmt: skip
        return list(held)


@contextmanager
def brokers(base: Path) -> Iterator[dict[str, Side]]:
    """The three brokers, each with the user `busbar` and SECRET (SQS: its own key)."""
    with ExitStack() as stack:
        for kind in ("nats", "rabbitmq", "sqs"):
            (base / kind).mkdir(parents=True)
        nats_broker = stack.enter_context(nats_server(base / "nats", auth=("busbar", SECRET)))
        rabbit = stack.enter_context(rabbitmq_server(base / "rabbitmq"))
        rabbit.add_user("busbar", SECRET)
        sqs = stack.enter_context(sqs_server(base / "sqs"))
        yield {"nats": NatsSide(nats_broker), "rabbitmq": RabbitSide(rabbit), "sqs": SqsSide(sqs)}
