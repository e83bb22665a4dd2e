"""The gunicorn worker class of `busbar web`: gunicorn's own gevent worker, with a
deadline on reading a request's headers and one on every read of its body.

A connection is a greenlet (a few KiB), not a thread: a client that connects and sends
nothing, or one byte a second, holds a socket and a greenlet while every other client is
served (with gthread, 16 such clients took every thread of the default 2 x 8 and
stopped all publishing). Two deadlines bound what a connection may hold:

- the request line and headers must arrive within BUSBAR_HEADER_TIMEOUT_S (counted from
  the end of the last answer on a kept-alive connection: it is also the idle limit);
  after it the connection is closed, as gunicorn closes an idle one;
- the body must arrive within BUSBAR_BODY_TIMEOUT_S of its headers, whole: `408` and
  the connection closed (the rest is never read). An answer the client does not take
  may stall a write no longer than that either.

Measured against gthread in bench.publish (docs/web.md).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import gevent
from gunicorn.workers.base_async import AsyncWorker
from gunicorn.workers.ggevent import GeventWorker
from werkzeug.exceptions import RequestTimeout


class DeadlineBody:
    """A request's body (gunicorn's reader) that must arrive whole by a deadline: each
    read may wait only what is left of it, and one that runs out raises 408."""

    def __init__(self, body: Any, seconds: float) -> None:
        self._body, self._seconds = body, seconds
        self._deadline = time.monotonic() + seconds
        self.expired = False

    def _within(self, read: Any, size: int | None) -> bytes:
        """gevent's Timeout, not the socket's: a read of n bytes is many receives, and a
        byte every so often would renew a socket timeout for ever."""
        left = self._deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            with gevent.Timeout(left, TimeoutError):
                return bytes(read(size))
        except TimeoutError:
            self.expired = True
            raise RequestTimeout(
                f"request body not received within BUSBAR_BODY_TIMEOUT_S ({self._seconds:g} s)"
            ) from None

    def read(self, size: int | None = None) -> bytes:
        return self._within(self._body.read, size)

    def readline(self, size: int | None = None) -> bytes:
        return self._within(self._body.readline, size)

    def __iter__(self) -> Any:
        return iter(self.readline, b"")


class DeadlineWorker(GeventWorker):
    """Set `header_timeout` and `body_timeout` (seconds) on a subclass: see worker_class."""

    header_timeout: float = 10.0
    body_timeout: float = 10.0

    def init_process(self) -> None:
        self._sockets: dict[Any, Any] = {}  # greenlet -> its client's socket
        self._idle: set[Any] = set()  # greenlets waiting for a request to begin
        super().init_process()

    @contextmanager
    def timeout_ctx(self) -> Iterator[None]:
        """Around each request's headers (gunicorn's async loop): the header deadline, whose
        `False` ends the wait quietly (gunicorn then closes the connection as an idle
        one); meanwhile the connection counts as idle, for a stop to close."""
        current = gevent.getcurrent()
        self._idle.add(current)
        try:
            with gevent.Timeout(self.header_timeout, False):
                yield
        finally:
            self._idle.discard(current)

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        """GeventWorker's handle makes the socket blocking without a limit; this one bounds
        every read and write by the body deadline instead."""
        client.settimeout(self.body_timeout)
        current = gevent.getcurrent()
        self._sockets[current] = client
        try:
            AsyncWorker.handle(self, listener, client, addr)
        finally:
            self._sockets.pop(current, None)

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> bool:
        """A body that missed its deadline was answered 408: the connection is closed
        (StopIteration is gunicorn's way), its unread rest never waited for."""
        body = DeadlineBody(req.body, self.body_timeout)
        req.body = body
        kept = bool(super().handle_request(listener_name, req, sock, addr))
        if body.expired:
            raise StopIteration
        return kept

    def close_idle(self) -> None:
        """On a stop, kept-alive connections waiting for their next request are shut (the
        client sees the close, as after the idle limit), so the worker ends as soon as
        the requests being served are answered instead of waiting out
        graceful_timeout for connections that may never send again."""
        for greenlet in list(self._idle):
            sock = self._sockets.get(greenlet)
            if sock is not None:  # the OS socket under gevent's: gevent's own shutdown
                with suppress(OSError):  # would fail the wait with EBADF, logged as an error
                    sock._sock.shutdown(socket.SHUT_RDWR)  # the read then sees the close

    def handle_exit(self, sig: Any, frame: Any) -> None:  # SIGTERM: graceful
        super().handle_exit(sig, frame)
        gevent.spawn(self.close_idle)

    def handle_quit(self, sig: Any, frame: Any) -> None:  # SIGINT, SIGQUIT: quick
        self.alive = False
        gevent.spawn(self.close_idle)
        super().handle_quit(sig, frame)


def worker_class(header_timeout: float, body_timeout: float) -> type[DeadlineWorker]:
    """gunicorn takes a class for `worker_class`: one carrying the configured deadlines,
    so no setting travels through the environment or a module global."""
    return type(
        "BusbarWorker",
        (DeadlineWorker,),
        {"header_timeout": header_timeout, "body_timeout": body_timeout},
    )
