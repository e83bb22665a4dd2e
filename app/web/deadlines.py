"""The deadlines of `busbar web`'s connections (app/web/worker.py): one sweeper per
process ends a read or a write that is past its deadline.

A gevent Timeout around each read did the same per request, but a timer started and
cancelled on every request made gevent serve kept-alive connections unfairly under load
(GET /health p99 about 100 ms against 10 ms without: docs/web.md). So the reads and
writes register their deadline in `Connections` and a single greenlet, twice a second,
throws the matching exception into those past it, from the hub, only while they read
or write: never inside the app's own work (a Redis call).
"""

from __future__ import annotations

import errno
import socket
import time
from contextlib import suppress
from typing import Any

import gevent
from werkzeug.exceptions import RequestTimeout

SWEEP_S = 0.5  # how often the deadlines are checked: a connection is cut at most this late


class HeadersLate(Exception):
    """The request line and headers did not come within their deadline: the connection
    is closed unanswered."""


class BodyLate(Exception):
    """The body did not come, whole, within its deadline: 408, then the connection is
    closed."""


class WriteLate(ConnectionResetError):
    """An answer the client did not take within BUSBAR_BODY_TIMEOUT_S: the connection is
    closed as if the client had reset it (gevent's handler ends such a one quietly)."""

    def __init__(self) -> None:
        super().__init__(errno.ECONNRESET, "answer not taken within BUSBAR_BODY_TIMEOUT_S")


class Connections:
    """One worker's client connections and their deadlines, kept by one sweeper.

    The deadlines are enforced by a single greenlet that wakes twice a second and
    raises HeadersLate or BodyLate in a connection that is past its deadline while
    reading (only then: never inside the app's own work, e.g. a Redis call). A gevent
    Timeout around each read did the same per request, but a timer started and
    cancelled on every request made gevent serve kept-alive connections unfairly
    under load (GET /health p99 about 100 ms against 10 ms without: docs/web.md)."""

    def __init__(self) -> None:
        self.sockets: dict[Any, Any] = {}  # greenlet -> its client's socket
        self.idle: set[Any] = set()  # waiting for their next request
        self.due: dict[Any, tuple[float, type[Exception]]] = {}  # reading or writing, until

    def reading(self, greenlet: Any, until: float, late: type[Exception]) -> None:
        self.due[greenlet] = (until, late)

    def done(self, greenlet: Any) -> None:
        self.due.pop(greenlet, None)

    def sweep(self) -> None:
        loop = gevent.get_hub().loop
        while True:
            gevent.sleep(SWEEP_S)
            now = time.monotonic()
            for greenlet, (until, late) in list(self.due.items()):
                if now >= until:
                    loop.run_callback(self._end, greenlet, late)

    def _end(self, greenlet: Any, late: type[Exception]) -> None:
        """In the hub, as gevent's own Timeout throws: a greenlet still listed is still
        inside its read (it leaves the list the moment a read returns), so the exception
        lands there and nowhere else."""
        if self.due.pop(greenlet, None) is not None and not greenlet.dead:
            greenlet.throw(late())

    def close_idle(self) -> None:
        for greenlet in list(self.idle):
            sock = self.sockets.get(greenlet)
            if sock is not None:  # the OS socket under gevent's: gevent's own shutdown
                with suppress(OSError):  # would fail the wait with EBADF, logged as an error
                    sock._sock.shutdown(socket.SHUT_RDWR)  # the read then sees the close


class UnreadRest:
    """Stands in for a body that missed its deadline: gevent's handler discards what is
    left of a body after each request, which would wait for it again."""

    def _discard(self) -> None:
        return None


class DeadlineBody:
    """A request's body (wsgi.input) that must arrive whole by a deadline: while it is
    read the sweeper may end the read (BodyLate), which is answered 408."""

    def __init__(self, body: Any, seconds: float, connections: Connections) -> None:
        self._body, self._seconds, self._connections = body, seconds, connections
        self._deadline = time.monotonic() + seconds
        self.expired = False

    def _within(self, read: Any, size: int | None) -> bytes:
        current = gevent.getcurrent()
        try:
            if time.monotonic() >= self._deadline:
                raise BodyLate
            self._connections.reading(current, self._deadline, BodyLate)
            try:
                return bytes(read(size))
            finally:
                self._connections.done(current)
        except BodyLate:
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
