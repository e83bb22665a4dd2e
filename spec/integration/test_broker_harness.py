"""The test RabbitMQ (spec/rabbitmq_server.py) and SQS (spec/sqs_server.py) are the ones a
test talks to: a free port that another process takes first must not pass for our
broker's (under `make check`'s four processes, one did: the tests spoke to it, then to
nobody)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import aio_pika
import pytest

import dev.redis_server
from spec import rabbitmq_server, sqs_server


@pytest.fixture
def squatter() -> Iterator[socket.socket]:
    """A port taken: it accepts connections and never answers."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(8)
    yield taken
    taken.close()


def first_port(module: object, taken: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The module's next free port is the taken one, then free ones."""
    ports, real = iter([taken]), dev.redis_server.free_port
    monkeypatch.setattr(module, "free_port", lambda: next(ports, None) or real())


def test_a_rabbitmq_whose_port_was_taken_starts_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, squatter: socket.socket
) -> None:
    taken = squatter.getsockname()[1]
    first_port(rabbitmq_server, taken, monkeypatch)
    with rabbitmq_server.rabbitmq_server(tmp_path) as broker:
        assert broker.port != taken

        async def talk() -> None:
            connection = await aio_pika.connect(broker.url, timeout=10)
            await connection.close()

        asyncio.run(talk())


def test_an_sqs_api_whose_port_was_taken_starts_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, squatter: socket.socket
) -> None:
    taken = squatter.getsockname()[1]
    first_port(sqs_server, taken, monkeypatch)
    with sqs_server.sqs_server(tmp_path) as server:
        assert server.port != taken
        assert server.queue("harness").endswith("/harness")


def test_a_free_port_is_one_no_outgoing_connection_takes() -> None:
    """A server restarted on the port its clients know (a RabbitMQ killed and restarted,
    a Redis crashed) found it taken under make test (`eaddrinuse`): the kernel had given
    it to one of the machine's outgoing connections, whose local ports it takes from its
    ephemeral range (as for these 200 sockets bound to port 0). free_port() chooses
    below that range, where none goes."""
    first = dev.redis_server._ephemeral_start()
    outgoing = [socket.socket() for _ in range(200)]
    try:
        for s in outgoing:
            s.bind(("127.0.0.1", 0))
        ports = [dev.redis_server.free_port() for _ in range(200)]
        assert all(s.getsockname()[1] >= first for s in outgoing)  # the kernel's range
        assert all(dev.redis_server.PORTS_FROM <= p < first for p in ports), ports
    finally:
        for s in outgoing:
            s.close()
