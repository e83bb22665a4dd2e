"""A real HTTP subscriber for end-to-end tests: records every delivery it receives.

It answers with whatever `responder` says (status code, optional delay; status CLOSE
hangs up without answering), and measures how many requests were in flight at once,
which must never exceed one per subscriber.
"""

from __future__ import annotations

import base64
import json
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from spec.integration.tls import server_context

CLOSE = 0  # a responder status: close the connection without sending any answer


@dataclass
class Received:
    path: str
    user: str
    content_type: str
    events: list[dict]
    at: float
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes = b""
    started: float = 0.0  # time.monotonic() when its headers were read: in flight from then
    ended: float = 0.0  # ... to when its answer was about to be sent
    peer: int = 0  # the sender's TCP port: which process sent it (processes.tcp_ports)
    client_cn: str = ""  # the CN of the TLS client certificate it presented, if any


@dataclass
class Subscriber:
    responder: Callable[[Received], tuple[int, float]] = lambda _: (200, 0.0)
    received: list[Received] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""
    close_after_answer: bool = False  # hang up after each answer, without saying so
    headers_out: dict[str, str] = field(default_factory=dict)  # sent with every answer
    body_out: bytes = b""  # the body of every answer

    @property
    def delivered(self) -> list[dict]:
        """Events of the requests that were acknowledged (2xx), in arrival order."""
        return [e for r in self.received if 200 <= r.status < 300 for e in r.events]

    def wait_for(self, count: int, timeout: float = 30.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.delivered) >= count:
                return self.delivered
            time.sleep(0.02)
        raise AssertionError(f"got {len(self.delivered)} of {count} events in {timeout:.0f} s")


def _handler(sub: Subscriber) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            started = time.monotonic()
            with sub.lock:
                sub.in_flight += 1
                sub.max_in_flight = max(sub.max_in_flight, sub.in_flight)
            try:
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                if len(body) < length:  # the sender died mid-request: nothing was delivered
                    raise ConnectionAbortedError("request cut short")
                auth = self.headers.get("Authorization", "")
                user = (
                    base64.b64decode(auth[6:]).decode().split(":")[0]
                    if auth.startswith("Basic ")
                    else ""
                )
                record = Received(
                    self.path,
                    user,
                    self.headers.get("Content-Type", ""),
                    json.loads(body) if body else [],
                    time.time(),
                    0,
                    dict(self.headers.items()),
                    body,
                    started,
                    peer=self.client_address[1],
                    client_cn=_client_cn(self.connection),
                )
                status, delay = sub.responder(record)
                if delay:
                    time.sleep(delay)
                record.status = status
            except Exception:
                with sub.lock:
                    sub.in_flight -= 1
                raise
            with sub.lock:
                record.ended = time.monotonic()
                sub.received.append(record)
                sub.in_flight -= 1
            if status == CLOSE:
                self.close_connection = True
                return
            try:
                self.send_response(status)
                for name, value in sub.headers_out.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(sub.body_out)))
                self.end_headers()
                if sub.body_out:
                    self.wfile.write(sub.body_out)
            except OSError:  # busbar gave up waiting (a timeout) and hung up first
                self.close_connection = True
            if sub.close_after_answer:  # as a server whose keep-alive timer ran out
                self.close_connection = True

        def log_message(self, *args: object) -> None:
            pass

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A worker killed mid-request resets its connection: expected here, not news."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _client_cn(connection: Any) -> str:
    peer = connection.getpeercert() if isinstance(connection, ssl.SSLSocket) else None
    for rdn in (peer or {}).get("subject", ()):
        for name, value in rdn:
            if name == "commonName":
                return str(value)
    return ""


@contextmanager
def serving(
    sub: Subscriber | None = None,
    tls: tuple[Path, Path] | None = None,
    host: str = "127.0.0.1",
    client_ca: Path | None = None,
) -> Iterator[Subscriber]:
    """`tls`: (certificate, key) to serve https with instead of http; `host`: the address
    to serve on (the cluster soak's workers reach it from their own networks);
    `client_ca`: with `tls`, only clients with a certificate this CA signed are served
    (mutual TLS: a handshake without one fails)."""
    sub = sub or Subscriber()
    server = _Server((host, 0), _handler(sub))
    scheme = "http"
    if tls is not None:
        context = server_context(tls, client_ca)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    sub.url = f"{scheme}://{host}:{server.server_address[1]}/events"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield sub
    finally:
        server.shutdown()
        server.server_close()
