"""One HTTP/1.1 exchange on an asyncio protocol: a request written whole, its answer
read by app/delivery/answer.py.

Why not aiohttp's client: its request path is generic (cookies, middlewares, multidicts,
redirect handling, a stream reader per body) and measured here at 102 µs of CPU and
132 µs wall for a callback POST, against 21-30 and 35-58 µs for this exchange (same
loop, same local subscriber; docs/delivery.md). A bus sends one kind of request and
needs two things of the answer, so it reads them and nothing else.

A connection that cannot be framed, or carries bytes nobody asked for, is closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from app.delivery.answer import Answer, AnswerReader
from app.errors import BadAnswer, Disconnected


class Connection(asyncio.Protocol):
    """One connection to a callback's origin, asked one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.used = False  # has carried a request: a close under the next one may be stale
        self.idle_since = 0.0
        self.on_closed: Callable[[], None] | None = None  # told once, when it closes
        self._reader: AnswerReader | None = None
        self._waiter: asyncio.Future[Answer] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport

    async def ask(self, request: bytes, limit: int = 0) -> tuple[Answer, bool]:
        """Write the request; its answer (with `limit`, its body kept and read up to that
        many bytes), and whether the connection can carry another."""
        assert self.transport is not None and self._waiter is None
        reader = self._reader = AnswerReader(limit)
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        was_used, self.used = self.used, True
        try:
            self.transport.write(request)
            answer = await waiter
        except Disconnected as exc:
            exc.stale = was_used and not reader.got_bytes
            raise
        finally:
            self._reader = self._waiter = None
        reusable = reader.reusable and not self.closed
        return answer, reusable and not self.transport.get_write_buffer_size()

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        if reader is None:  # bytes nobody asked for: the connection is out of step
            self.close()
            return
        try:
            whole = reader.feed(data)
        except BadAnswer as exc:
            self._settle(exc)
            self.close()
            return
        if whole:
            self._settle(None)

    def eof_received(self) -> bool:
        reader = self._reader
        if reader is not None and reader.eof():
            self._settle(None)
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: ARG002  # why is moot: no answer
        self._closed()
        reader = self._reader
        if reader is not None and reader.eof():
            self._settle(None)
        else:
            self._settle(Disconnected("the callback closed the connection without an answer"))

    def _settle(self, error: Exception | None) -> None:
        waiter, reader = self._waiter, self._reader
        if waiter is None or waiter.done() or reader is None:
            return
        if error is not None:
            waiter.set_exception(error)
        else:
            assert reader.answer is not None
            waiter.set_result(reader.answer)

    def close(self) -> None:
        self._closed()
        if self.transport is not None:
            self.transport.close()

    def _closed(self) -> None:
        self.closed = True
        told, self.on_closed = self.on_closed, None
        if told is not None:
            told()
