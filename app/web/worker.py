"""The gunicorn worker class of `busbar web`: gunicorn's gevent_pywsgi worker (gevent's
own HTTP server in each gunicorn process), with a deadline on a request's headers and
one on its body.

A connection is a greenlet (a few KiB), not a thread: a client that connects and sends
nothing, or one byte a second, holds a socket and a greenlet while every other client is
served (with gthread, 16 such clients took every thread of the default 2 x 8 and
stopped all publishing). Two deadlines bound what a connection may hold:

- the request line and headers must arrive within BUSBAR_HEADER_TIMEOUT_S (counted from
  the end of the last answer on a kept-alive connection: it is also the idle limit);
  after it the connection is closed without an answer;
- the body must arrive within BUSBAR_BODY_TIMEOUT_S of its headers, whole: `408` and
  the connection closed (the rest is never read). An answer the client does not take
  may stall a write no longer than that either.

gevent_pywsgi rather than gunicorn's `gevent` class: in one sitting it spent 220-229
against 278-285 µs of CPU per publish, and served kept-alive connections fairly under
load where `gevent` let some wait 75-200 ms (docs/web.md).
"""

from __future__ import annotations

import errno
import socket
import time
from contextlib import suppress
from typing import Any

import gevent
from gunicorn.workers.ggevent import GeventPyWSGIWorker, PyWSGIHandler
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


class _Read:
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


class DeadlineHandler(PyWSGIHandler):
    """gevent.pywsgi's handler (by way of gunicorn's, for its access log) with the two
    deadlines; worker_class sets the class attributes."""

    header_timeout: float = 10.0
    body_timeout: float = 10.0
    connections: Connections = Connections()

    def handle(self) -> None:
        """No socket timeout: gevent times a socket's every wait with a timer of its own,
        which costs what a Timeout per request did (Connections); the sweeper bounds
        reads and writes instead."""
        current = gevent.getcurrent()
        self.connections.sockets[current] = self.socket
        try:
            super().handle()
        finally:
            self.connections.sockets.pop(current, None)
            self.connections.idle.discard(current)
            self.connections.done(current)

    def read_requestline(self) -> str:
        """Waiting for a request (idle, for a stop to close) until the header deadline;
        past it an empty line, which closes the connection unanswered. The deadline
        runs on through read_request (the headers)."""
        current = gevent.getcurrent()
        self.connections.reading(current, time.monotonic() + self.header_timeout, HeadersLate)
        self.connections.idle.add(current)
        try:
            return str(super().read_requestline())
        except HeadersLate:
            self.connections.done(current)
            return ""
        finally:
            self.connections.idle.discard(current)

    def _sendall(self, data: bytes) -> None:
        current = gevent.getcurrent()
        self.connections.reading(current, time.monotonic() + self.body_timeout, WriteLate)
        try:
            super()._sendall(data)
        finally:
            self.connections.done(current)

    def read_request(self, raw_requestline: str) -> Any:
        try:
            return super().read_request(raw_requestline)
        finally:
            self.connections.done(gevent.getcurrent())

    def _handle_client_error(self, ex: Exception) -> Any:
        if isinstance(ex, HeadersLate):
            return None  # closed without an answer, as at the request line
        return super()._handle_client_error(ex)

    def get_environ(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environ()
        self._body = environ["wsgi.input"] = DeadlineBody(
            environ["wsgi.input"], self.body_timeout, self.connections
        )
        return environ

    def run_application(self) -> None:
        """A body that missed its deadline was answered 408: the connection is closed,
        its unread rest never waited for."""
        try:
            super().run_application()
        finally:
            if self._body.expired:
                self.close_connection = True
                self.wsgi_input = _Read()


class DeadlineWorker(GeventPyWSGIWorker):
    connections: Connections = Connections()

    def run(self) -> None:
        gevent.spawn(self.connections.sweep)
        super().run()

    def handle_exit(self, sig: Any, frame: Any) -> None:  # SIGTERM: graceful
        super().handle_exit(sig, frame)
        gevent.spawn(self.connections.close_idle)

    def handle_quit(self, sig: Any, frame: Any) -> None:  # SIGINT, SIGQUIT: quick
        self.alive = False
        gevent.spawn(self.connections.close_idle)
        super().handle_quit(sig, frame)


def worker_class(header_timeout: float, body_timeout: float) -> type[DeadlineWorker]:
    """gunicorn takes a class for `worker_class`: one carrying the configured deadlines
    (and its own connection registry), so no setting travels through the environment
    or a module global."""
    connections = Connections()
    handler = type(
        "BusbarHandler",
        (DeadlineHandler,),
        {"header_timeout": header_timeout, "body_timeout": body_timeout,
         "connections": connections},
    )  # fmt: skip
    return type(
        "BusbarWorker", (DeadlineWorker,), {"wsgi_handler": handler, "connections": connections}
    )
