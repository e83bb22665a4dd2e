"""Sending a batch to a real callback: the total deadline, the lease, and the reasons a
failure is recorded and logged with (never the exception's text, which may hold secrets)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from app.delivery.flight import Flight
from app.errors import JobLost
from spec.app.delivery.delivery_bench import Bench
from spec.app.delivery.driven import Driven
from spec.integration.subscriber import serving


@contextmanager
def answering(raw: bytes, byte_every: float = 0.0) -> Iterator[str]:
    """A callback that accepts, reads the request, sends `raw` and closes; with
    `byte_every`, one byte at a time, each well within a read timeout, so only a total
    deadline can stop it."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                pieces = [bytes([b]) for b in raw] if byte_every else [raw]
                for piece in pieces:
                    if byte_every and stop.wait(byte_every):
                        return
                    try:
                        conn.sendall(piece)
                    except OSError:
                        break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/in"
    finally:
        stop.set()
        with contextlib.suppress(OSError):  # wakes the accept() waiting for a next caller
            server.shutdown(socket.SHUT_RDWR)
        server.close()
        thread.join(5)


def flight_to(bench: Bench, callback: str) -> tuple[Driven, Flight]:
    bench.subscribe(callback, ["orders"], max=1, timeout=0)
    bench.publish(1)
    job = bench.queue.acquire("w/0", 1)
    assert job is not None
    flight = bench.delivery.begin("sub", "w/0", job)
    assert isinstance(flight, Flight)
    return bench.delivery, flight


@pytest.fixture
def bench(redis_client, keys, scripts) -> Bench:
    return Bench(redis_client, keys, scripts, timeout=1, connect_timeout=1)


def test_a_callback_that_trickles_bytes_is_cut_at_the_total_deadline(bench: Bench):
    with answering(b"HTTP/1.1 200 OK\r\nX-Slow: " + b"x" * 1000, byte_every=0.2) as url:
        delivery, flight = flight_to(bench, url)
        started = time.monotonic()
        result = delivery.send(flight)
        took = time.monotonic() - started
    assert (result.text, result.outcome) == ("timeout", "timeout")
    assert 0.9 < took < 2.0  # BUSBAR_TIMEOUT is 1 s; each byte came within it


def test_a_flight_begun_before_a_long_pause_is_not_sent(redis_client, keys, scripts):
    bench = Bench(redis_client, keys, scripts, scrub_after_ms=1000)
    with serving() as sub:
        delivery, flight = flight_to(bench, sub.url)
        time.sleep(0.6)  # over half the scrub window: another worker may own it by now
        with pytest.raises(JobLost):
            delivery.send(flight)
        assert sub.received == []


@pytest.mark.parametrize(
    ("callback", "reason"),
    [
        ("http://127.0.0.1:9/in", "connection_refused"),
        ("http://no-such-host.invalid/in", "dns_failure"),
        ("https://127.0.0.1:{port}/in", "tls_error"),  # TLS spoken to a plain HTTP server
        ("http://127.0.0.1:{port}/in", "503"),
    ],
)
def test_failures_are_recorded_with_a_short_reason(bench: Bench, callback: str, reason: str):
    with serving() as sub:
        sub.responder = lambda _: (503, 0.0)
        port = sub.url.split(":")[2].split("/")[0]
        delivery, flight = flight_to(bench, callback.format(port=port))
        assert delivery.send(flight).text == reason


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "bad_answer"),  # not HTTP at all
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\nx", "bad_answer"),
        (b"", "connection_error"),  # closed without a word
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "connection_error"),  # cut short
        (b"HTTP/1.1 201 Created\r\n\r\nno length: the body runs to the close", "201"),
    ],
)
def test_an_answer_that_is_not_http_is_a_bad_answer(bench: Bench, raw: bytes, reason: str):
    with answering(raw) as url:
        delivery, flight = flight_to(bench, url)
        assert delivery.send(flight).text == reason
