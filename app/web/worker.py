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

import json
import time
from collections.abc import Iterator
from typing import Any

import gevent
from gevent.pywsgi import format_date_time
from gunicorn.workers.ggevent import GeventPyWSGIWorker, PyWSGIHandler

from app.errors import BadFraming
from app.web.chunked import ChunkedBody
from app.web.deadlines import Connections, DeadlineBody, HeadersLate, UnreadRest, WriteLate
from app.web.request_headers import read_head


class HttpDate:
    """The `Date` of an answer, formatted once a second: gevent formats it anew for each
    answer (`format_date_time`, 1.65 µs a call, 2.2% of a publish's samples)."""

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def now(self) -> bytes:
        second = int(time.time())
        if second != self._second:
            self._value = bytes(format_date_time(second))
            self._second = second
        return self._value


class DeadlineHandler(PyWSGIHandler):  # type: ignore[misc]  # gunicorn ships no types: Any
    """gevent.pywsgi's handler (by way of gunicorn's, for its access log) with the two
    deadlines; worker_class sets the class attributes."""

    header_timeout: float = 10.0
    body_timeout: float = 10.0
    connections: Connections = Connections()
    dates: HttpDate = HttpDate()
    code: int  # gevent's, set per answer
    provided_date: str | bytes | None

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
        """gevent's, with one change: a first `send` usually takes a whole answer, where
        gevent's `sendall` asks the socket for its send buffer size (a getsockopt) on
        every call, 6.5% of a publish's samples under wrk (docs/performance.md)."""
        current = gevent.getcurrent()
        self.connections.reading(current, time.monotonic() + self.body_timeout, WriteLate)
        try:
            try:
                sent = self.socket.send(data)
            except OSError as exc:  # as gevent's: the status its log line shows, then raised
                self.status = f"socket error: {exc}"
                if self.code > 0:
                    self.code = -self.code
                raise
            self.response_length += sent
            if sent < len(data):
                super()._sendall(memoryview(data)[sent:])
        finally:
            self.connections.done(current)

    def _headers(self) -> Iterator[tuple[str, str]]:
        """The environ's HTTP_* entries, straight from the parsed fields (no folded
        lines to join: they are refused). A name with `_` is dropped, as gevent does:
        `X-Client_Id` must not pass for `X-Client-Id`."""
        for name, value in self.headers.fields:
            if "_" not in name:
                key = name.replace("-", "_").upper()
                if key != "CONTENT_TYPE" and key != "CONTENT_LENGTH":
                    yield "HTTP_" + key, value

    def finalize_headers(self) -> None:
        if self.provided_date is None:  # gevent's then leaves the Date alone
            self.provided_date = self.dates.now()
            self.response_headers.append((b"Date", self.provided_date))
        super().finalize_headers()

    def log_request(self) -> None:
        """gunicorn's builds a record (dates, header lists) for every request before its
        log finds that no access log is configured (busbar's default)."""
        if self.server.log.access_log_enabled:
            super().log_request()

    def read_request(self, raw_requestline: str) -> bool:
        """The request line and headers, framed strictly (app/web/request_headers.py)
        instead of by gevent's reader; BadFraming is answered by _handle_client_error."""
        try:
            head = read_head(raw_requestline, self.rfile)
        finally:
            self.connections.done(gevent.getcurrent())
        self.requestline = raw_requestline.rstrip("\r\n")
        self.command, self.path, self.request_version = head.method, head.target, head.version
        self.headers, self.content_length = head.headers, head.length
        self.close_connection, self._chunked = head.close, head.chunked
        return True

    def _handle_client_error(self, ex: Exception) -> Any:
        if isinstance(ex, HeadersLate):
            return None  # closed without an answer, as at the request line
        if isinstance(ex, BadFraming):
            return str(ex.status), framing_refusal(ex)
        return super()._handle_client_error(ex)

    def get_environ(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environ()
        if self._chunked:  # gevent's decoder is lenient (app/web/chunked.py)
            self.wsgi_input: Any = ChunkedBody(self.rfile, self.wsgi_input)
        self._body = environ["wsgi.input"] = DeadlineBody(
            self.wsgi_input, self.body_timeout, self.connections
        )
        return environ

    def handle_one_response(self) -> None:
        """A chunked body found broken, by the app or by the discard after its answer,
        leaves the stream out of step: the connection ends with this answer."""
        super().handle_one_response()
        if getattr(self.wsgi_input, "broken", False):
            self.close_connection = True

    def run_application(self) -> None:
        """A body that missed its deadline was answered 408: the connection is closed,
        its unread rest never waited for."""
        try:
            super().run_application()
        finally:
            if self._body.expired:
                self.close_connection = True
                self.wsgi_input = UnreadRest()


def framing_refusal(error: BadFraming) -> bytes:
    """The whole answer to a request refused before the app saw it: its status, the rule
    broken in busbar's JSON error shape, and the connection closed."""
    reason = {400: "Bad Request", 501: "Not Implemented"}.get(error.status, "Bad Request")
    body = json.dumps({"error": f"request refused: {error.message}"}).encode()
    return (
        b"HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (error.status, reason.encode(), len(body), body)
    )


class DeadlineWorker(GeventPyWSGIWorker):  # type: ignore[misc]  # gunicorn ships no types: Any
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
         "connections": connections, "dates": HttpDate()},
    )  # fmt: skip
    return type(
        "BusbarWorker", (DeadlineWorker,), {"wsgi_handler": handler, "connections": connections}
    )
