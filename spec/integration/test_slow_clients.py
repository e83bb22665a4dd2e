"""Slow and idle clients against a real `busbar web` (issue 23 item 3: with gthread, 32
connections sending a byte at a time blocked every publish). With the default worker
class a connection costs a socket, not a thread: 1,000 of them, idle, sending their
headers a byte at a time, or their body a byte at a time, leave another client's publish
median under 50 ms and none near a deadline (p99 under 0.5 s: a blocked publish waits
seconds, for a thread a slow client holds; a 2-core machine under make test's load has
put p99 at 56 ms without any blocking); and each is cut after its deadline (headers:
the connection closed; body: 408, then closed).

Marked `layout_free`: what it measures is the web's sockets and threads, not Redis; the
publish it times is one whose Redis part runs on both layouts wherever a test publishes
(test_delivery.py, the composition matrix)."""

from __future__ import annotations

import socket
import statistics
import threading
import time
from contextlib import suppress
from pathlib import Path

import pytest

from spec.integration.bus import bus
from spec.integration.subscriber import serving

IDLE, SLOW_HEADERS, SLOW_BODIES = 350, 350, 300
DEADLINE = 4  # BUSBAR_HEADER_TIMEOUT_S and BUSBAR_BODY_TIMEOUT_S here


class Drip:
    """A byte every half second on each of its sockets, from one thread."""

    def __init__(self, parts: list[tuple[socket.socket, bytes]]) -> None:
        self.parts = [(s, memoryview(data)) for s, data in parts]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        sent = 0
        while not self.stop.wait(0.5):
            for sock, data in self.parts:
                if sent < len(data):
                    with suppress(OSError):  # cut by the server: what the test waits for
                        sock.send(data[sent : sent + 1])
            sent += 1


def connect(port: int, first: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    if first:
        sock.sendall(first)
    return sock


def closed_by_server(sock: socket.socket) -> bytes:
    """What the server sent before closing (b"" for nothing); raises if it keeps it open."""
    sock.settimeout(DEADLINE + 10)
    got = b""
    try:
        while chunk := sock.recv(4096):
            got += chunk
    except ConnectionResetError:
        pass
    return got


@pytest.mark.alone
@pytest.mark.layout_free
def test_a_thousand_slow_clients_cost_sockets_not_publishes(
    redis_url: str, redis_client: object, tmp_path: Path
) -> None:
    """redis_client: a flushed Redis (another test's events for `sub` would arrive here)."""
    deadlines = {"BUSBAR_HEADER_TIMEOUT_S": str(DEADLINE), "BUSBAR_BODY_TIMEOUT_S": str(DEADLINE)}
    with serving() as sub, bus(redis_url, tmp_path, **deadlines) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=100, timeout=0)
        port = int(b.base.rsplit(":", 1)[1])
        request = b"POST /topics/orders HTTP/1.1\r\nHost: x\r\nAuthorization: Basic cHViOg==\r\n"
        body_head = request + b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
        started = time.monotonic()
        idle = [connect(port) for _ in range(IDLE)]
        headers = [connect(port, b"P") for _ in range(SLOW_HEADERS)]
        bodies = [connect(port, body_head + b"[") for _ in range(SLOW_BODIES)]
        drip = Drip([(s, request[1:]) for s in headers] + [(s, b"{" * 999) for s in bodies])
        try:
            took = []
            for i in range(200):  # another client, while all 1,000 are held
                sent = time.perf_counter()
                b.publish("pub", "orders", {"type": "create", "url": f"https://o.test/{i}"})
                took.append(time.perf_counter() - sent)
            assert time.monotonic() - started < DEADLINE  # measured while all were open
            median, p99 = statistics.median(took), statistics.quantiles(took, n=100)[98]
            assert median < 0.05, f"publish median {median * 1000:.1f} ms beside 1,000 slow clients"
            assert p99 < 0.5, f"publish p99 {p99 * 1000:.1f} ms beside 1,000 slow clients"
            assert len(sub.wait_for(200)) == 200

            for sock in idle + headers:  # cut at the header deadline, with no answer
                assert closed_by_server(sock) == b""
            for sock in bodies:  # cut at the body deadline, with a 408 naming it
                answer = closed_by_server(sock)
                assert answer.startswith(b"HTTP/1.1 408 "), answer[:80]
                assert b"BUSBAR_BODY_TIMEOUT_S" in answer
            cut = time.monotonic() - started
            assert DEADLINE - 0.5 < cut < DEADLINE + 5, cut
        finally:
            drip.stop.set()
            for sock in idle + headers + bodies:
                sock.close()
        # the bus serves on as before
        b.publish("pub", "orders", {"type": "create", "url": "https://o.test/last"})
        assert sub.wait_for(201)[-1]["url"] == "https://o.test/last"
