"""The subscriber side of the end-to-end benchmarks: a local HTTP server in its own
process (so its HTTP parsing never competes with the publishing threads' GIL) that
answers 200 and keeps one record per request. Re-exported by bench.common.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from typing import Any

Record = tuple[float, str, list[Any]]  # (received at ms, path, data["s"] of each event)


def by_lane(records: list[Record], lanes: tuple[int, ...]) -> dict[int, list[tuple[float, float]]]:
    """(received at, sent at) of every event stamped `{"s": [lane, sent at ms]}`, by lane:
    how the route benchmarks tell one subscriber's lanes apart on arrival."""
    found: dict[int, list[tuple[float, float]]] = {lane: [] for lane in lanes}
    for at, _, stamps in records:
        for lane, sent_at in stamps:
            found[lane].append((at, sent_at))
    return found


def _context(tls: tuple[str, str, str]) -> ssl.SSLContext:
    """(certificate, key, client CA or ""): with a client CA, only clients with a
    certificate it signed are served (mutual TLS)."""
    cert, key, client_ca = tls
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    if client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=client_ca)
    return context


def _serve(
    control: Connection, counter: Any, delay: float = 0.0, tls: tuple[str, str, str] | None = None
) -> None:
    """The subscriber process: answers 200 to every POST (after `delay` seconds, like a
    subscriber doing work), keeps one record per request; with `tls`, over https."""
    context = _context(tls) if tls else None
    records: list[Record] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the worker's requests.Session expects

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            at = time.time() * 1000
            events = json.loads(body)
            if delay:
                time.sleep(delay)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            stamps = [(e.get("data") or {}).get("s") for e in events]
            with lock:
                records.append((at, self.path, stamps))
            with counter.get_lock():
                counter.value += len(events)

        def log_message(self, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        # socketserver listens with a backlog of 5: a worker that opens hundreds of
        # connections at once (the engine's slots do) saw its SYNs dropped and its
        # connects time out, a limit of this stand-in, not of a subscriber behind a
        # real server (gunicorn listens with 2,048, nginx with 511)
        request_queue_size = 1024

        def get_request(self) -> tuple[Any, Any]:
            conn, address = self.socket.accept()
            if context is None:
                return conn, address
            # the handshake on the connection's own thread, not the accepting one
            return context.wrap_socket(
                conn, server_side=True, do_handshake_on_connect=False
            ), address

        def finish_request(self, request: Any, client_address: Any) -> None:
            if context is not None:
                request.do_handshake()
            super().finish_request(request, client_address)

        def handle_error(self, request: Any, client_address: Any) -> None:
            """A client refused for want of a certificate, or one hanging up: not news."""
            if not isinstance(sys.exc_info()[1], OSError):
                super().handle_error(request, client_address)

    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    control.send(server.server_address[1])
    while control.recv() == "take":
        with lock:
            taken, records[:] = list(records), []
        control.send(taken)


class Sink:
    """The local HTTP subscriber, in its own process; `received` counts events."""

    delay = 0.0  # seconds before each answer (SlowSink)

    def __init__(self, tls: tuple[str, str, str] | None = None) -> None:
        """`tls`: (certificate, key, client CA or "") to serve https."""
        ctx = mp.get_context("spawn")
        self._counter = ctx.Value("q", 0)
        self._control, child = ctx.Pipe()
        self.process = ctx.Process(
            target=_serve, args=(child, self._counter, self.delay, tls), daemon=True
        )
        self.process.start()
        self.port: int = self._control.recv()

    @property
    def received(self) -> int:
        return int(self._counter.value)

    def wait_for(self, count: int, timeout: float) -> bool:
        """Until `count` events arrived in total or `timeout` seconds passed."""
        deadline = time.monotonic() + timeout
        while self.received < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
        return True

    def take(self) -> list[Record]:
        """Every request's record since the last take."""
        self._control.send("take")
        return self._control.recv()

    def stop(self) -> None:
        self._control.send("stop")
        self.process.join(5)
        self.process.kill()  # a no-op once it has exited


class SlowSink(Sink):
    """A subscriber that takes `delay` seconds per request: its capacity is then known
    (about max / delay events/s), whatever the machine, so a load can be set above it."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        super().__init__()
