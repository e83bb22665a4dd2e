"""The engine's client (app/delivery/callback.py) against a raw TCP server that answers
crafted bytes: an answer framed two ways is a failed delivery, and a second answer
smuggled behind a first, in its bytes or after them, is never taken for the next
delivery's answer on the kept-alive connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from app.delivery.callback import CallbackClient
from app.errors import BadAnswer
from app.models.callback_policy import LOOPBACK_OPEN

OK_EMPTY = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
SMUGGLED = b"HTTP/1.1 204 No Content\r\n\r\n"


class RawServer:
    """Answers the n-th request (over all connections) with answers[n], as bytes; `late`
    bytes are sent on the same connection a moment after that answer. `on[n]`: the
    connection (numbered as accepted) the n-th request came on: a count of connections
    alone also counts any the client opened and did not use."""

    def __init__(self, answers: list[bytes], late: dict[int, bytes] | None = None) -> None:
        self.answers, self.late = answers, late or {}
        self.requests = 0
        self.connections = 0
        self.on: list[int] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        mine = self.connections
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                n, self.requests = self.requests, self.requests + 1
                self.on.append(mine)
                writer.write(self.answers[n])
                await writer.drain()
                if n in self.late:
                    await asyncio.sleep(0.05)
                    writer.write(self.late[n])
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def serving(server: RawServer) -> AsyncIterator[Callable[[], object]]:
    listener = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    client = CallbackClient(policy=LOOPBACK_OPEN)

    async def post() -> object:
        try:
            answer = await client.exchange(f"http://127.0.0.1:{port}/in", b"[]", {}, "u")
            return answer.status
        except BadAnswer as exc:
            return exc

    try:
        yield post
    finally:
        await client.close()
        listener.close()


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: +0\r\n\r\n",
        b"HTTP/1.1 200 OK\nContent-Length: 0\n\n",
    ],
)
def test_an_answer_framed_two_ways_is_a_failed_delivery(answer: bytes):
    async def run() -> None:
        server = RawServer([answer, OK_EMPTY])
        async with serving(server) as post:
            assert isinstance(await post(), BadAnswer)
            assert await post() == 200  # on a new connection: the first was closed
        assert server.on[0] != server.on[1]

    asyncio.run(run())


def test_a_second_answer_in_the_same_bytes_is_not_the_next_deliverys():
    """The subscriber (or something between) sends 200 and, in the same bytes, a 204:
    the 200 is taken, the connection closed, and the next delivery hears its own 500."""

    async def run() -> None:
        server = RawServer([OK_EMPTY + SMUGGLED, b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n"])
        async with serving(server) as post:
            assert await post() == 200
            assert await post() == 500
        assert server.on[0] != server.on[1]

    asyncio.run(run())


def test_a_second_answer_arriving_later_is_not_the_next_deliverys():
    """A 204 nobody asked for comes 50 ms after a whole 200, while the connection waits
    for its next request: the connection is closed and the next delivery, on a new one,
    hears its own 500."""

    async def run() -> None:
        fail = b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n"
        server = RawServer([OK_EMPTY, fail], late={0: SMUGGLED})
        async with serving(server) as post:
            assert await post() == 200
            await asyncio.sleep(0.3)
            assert await post() == 500
        assert server.on[0] != server.on[1]

    asyncio.run(run())


def test_a_whole_answer_keeps_the_connection_for_the_next():
    """The contrast: well-framed answers share one connection."""

    async def run() -> None:
        server = RawServer([OK_EMPTY, OK_EMPTY])
        async with serving(server) as post:
            assert await post() == 200
            assert await post() == 200
        assert server.on[0] == server.on[1]

    asyncio.run(run())
