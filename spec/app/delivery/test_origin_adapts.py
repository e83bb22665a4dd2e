"""The adaptive connection limit per origin (app/delivery/origin_limit.py) on the engine's
callback client against real servers on loopback, one of each kind a receiver fleet
has: a capable asyncio server with a deep accept queue (a load balancer, an API
gateway), a small threaded server with the standard library's accept backlog of 5, one
that stops accepting past N connections, and one whose answers slow down as more are
asked at once. The limit converges near what each takes, and nothing fails that the
origin could have served."""

from __future__ import annotations

import asyncio
import multiprocessing
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from multiprocessing.sharedctypes import Synchronized

import pytest

from app.delivery.callback import CallbackClient, Timeouts
from app.delivery.gate import Limits
from app.errors import OriginBusy
from app.models.callback_policy import LOOPBACK_OPEN
from app.services.origin_limits import OriginRow

ADAPTIVE = Limits(64, 4, 4096)  # the product's defaults

# Each asserts what the limit learnt or how long the fan-out took: beside make test's
# other processes and a JVM on 2 cores, the servers here were starved (a threaded one
# dropped SYNs past 30 s; a capable one was read at 147 connections where alone it
# reaches 4,096), so they run alone.
pytestmark = pytest.mark.alone


class Counting:
    """Connections open now and at most, as a server sees them."""

    def __init__(self) -> None:
        self.open = self.most_open = self.answered = 0
        self.lock = threading.Lock()

    def opened(self) -> None:
        with self.lock:
            self.open += 1
            self.most_open = max(self.most_open, self.open)

    def closed(self) -> None:
        with self.lock:
            self.open -= 1


def answering(counting: Counting, answer_s: Callable[[int], float], idle_s: float = 0):
    """An asyncio connection handler: 200 after answer_s(open connections); with
    `idle_s`, a kept-alive connection with no request for that long is closed, as
    servers do (without it, one at its connection limit never took those waiting)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        counting.opened()
        try:
            while True:
                async with asyncio.timeout(idle_s or None):
                    head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                await asyncio.sleep(answer_s(counting.open))
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                counting.answered += 1
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            pass
        finally:
            counting.closed()
            writer.close()

    return serve


async def fan_out(
    url: str, count: int, wait_s: float = 60.0, stall_s: float = 0.0
) -> tuple[list, float, CallbackClient]:
    """`count` deliveries at once through one client with the default limits: their
    statuses (or "busy"), the seconds they took, and the client. With `stall_s`, the
    loop stops that long a second in, as a worker's does in a long collection or on a
    starved core."""
    client = CallbackClient(policy=LOOPBACK_OPEN, timeouts=Timeouts(2.0, 20.0, wait_s),
                            limits=ADAPTIVE)  # fmt: skip

    async def stall() -> None:
        await asyncio.sleep(1.0)
        time.sleep(stall_s)

    stalling = asyncio.create_task(stall()) if stall_s else None

    async def deliver() -> int | str:
        try:
            connection = await client.connection(url)
        except OriginBusy:
            return "busy"
        return (await client.exchange(url, b"[]", {}, "u", connection)).status

    began = time.monotonic()
    statuses = await asyncio.gather(*(deliver() for _ in range(count)))
    if stalling is not None:
        await stalling
    return statuses, time.monotonic() - began, client


def on_asyncio_server(
    answer_s: Callable[[int], float], count: int, stall_s: float = 0.0
) -> tuple[list, float, OriginRow, Counting]:
    """`count` deliveries to one asyncio server with a deep accept queue answering in
    answer_s(open connections): their statuses, seconds, the origin's row, the counts
    (`stall_s`: fan_out's)."""
    counting = Counting()

    async def run() -> tuple[list, float, OriginRow]:
        server = await asyncio.start_server(
            answering(counting, answer_s), "127.0.0.1", 0, backlog=4096
        )
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/in"
        statuses, took, client = await fan_out(url, count, stall_s=stall_s)
        (row,) = client.origins(10)
        await client.close()
        server.close()
        return statuses, took, row

    return (*asyncio.run(run()), counting)


def test_a_capable_origin_gets_many_more_than_the_start():
    """1,500 deliveries answering in 300 ms, one asyncio server with a deep accept queue:
    64 at a time took 7 s; the limit grows past 4 times the start and all are answered
    within 4.5 s (alone here: past 700, within 2 s; under make test's load, 441)."""
    statuses, took, row, counting = on_asyncio_server(lambda _open: 0.3, 1500)
    assert statuses == [200] * 1500
    assert took < 4.5, took
    assert counting.most_open > 256 and row.limit > 256, (counting.most_open, row)


@pytest.mark.parametrize("stall_s", [0.0, 1.0], ids=["steady", "loop-stalled"])
def test_an_origin_slowing_under_load_is_not_pushed_far_past_its_knee(stall_s: float):
    """Answers in 20 ms up to 40 connections, 20 ms slower for each 20 more: the limit
    comes back under load, and no delivery fails; also when the worker's loop stops for
    a second mid-burst (the line waited on both sides of it: no new burst, whose fast
    growth from answer times learnt again at that load took it to 259 in CI)."""
    statuses, _took, row, _counting = on_asyncio_server(
        lambda open_: 0.02 * (1 + max(0, open_ - 40) / 20), 4000, stall_s
    )
    assert statuses == [200] * 4000
    assert 16 <= row.limit < 200, row  # near the knee (a loaded machine: lower), not far past


def serve_at_most(n: int, answer_s: float, port: Connection, most: Synchronized) -> None:
    """A server that stops accepting while `n` connections are open: later connects
    wait in its accept queue (8: above BUSBAR_ORIGIN_CONNECTING, so a burst of connects
    fits), then the kernel drops their SYNs, as a server at its connection limit does.
    In a process of its own, so its accepts never wait on the test's event loop; one
    event loop, so an accept is never a thread's start."""
    counting = Counting()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port.send(listener.getsockname()[1])
    serve = answering(counting, lambda _open: answer_s, idle_s=0.5)

    async def handle(conn: socket.socket) -> None:
        reader, writer = await asyncio.open_connection(sock=conn)
        await serve(reader, writer)

    async def accept() -> None:
        loop, tasks, held = asyncio.get_running_loop(), set(), [0]

        def done(task: asyncio.Task) -> None:
            tasks.discard(task)
            held[0] -= 1

        while True:
            if held[0] >= n:
                await asyncio.sleep(0.0005)
                continue
            conn, _ = await loop.sock_accept(listener)
            held[0] += 1
            most.value = max(most.value, held[0])
            task = asyncio.create_task(handle(conn))
            tasks.add(task)
            task.add_done_callback(done)

    asyncio.run(accept())


@contextmanager
def accepting_at_most(n: int, answer_s: float) -> Iterator[tuple[str, Synchronized]]:
    most = multiprocessing.Value("i", 0)
    theirs, ours = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve_at_most, args=(n, answer_s, theirs, most),
                                     daemon=True)  # fmt: skip
    server.start()
    try:
        yield f"http://127.0.0.1:{ours.recv()}/in", most
    finally:
        server.kill()
        server.join()


def test_an_origin_that_stops_accepting_past_n_is_held_near_n():
    """At most 30 connections accepted: every delivery is answered (none fails: the
    connects it did not take are waits, not failures), and the limit ends near 30 and
    its accept queue."""

    async def run(url: str) -> None:
        statuses, _took, client = await fan_out(url, 600)
        (row,) = client.origins(10)
        await client.close()
        assert statuses == [200] * 600
        assert 4 <= row.limit <= 45, row  # a loaded machine accepts slower: fewer

    with accepting_at_most(30, 0.02) as (url, most):
        asyncio.run(run(url))
        assert most.value <= 30


def test_a_small_threaded_server_serves_every_delivery():
    """The standard library's threaded server, accept backlog 5, answering in 50 ms:
    500 deliveries at once, every one answered, none held back."""
    counting = Counting()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            counting.opened()

        def finish(self) -> None:
            super().finish()
            counting.closed()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(0.05)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:

        async def run() -> None:
            url = f"http://127.0.0.1:{server.server_address[1]}/in"
            statuses, took, client = await fan_out(url, 500, wait_s=30)
            await client.close()
            assert statuses == [200] * 500, {s for s in statuses if s != 200}
            assert took < 10, took

        asyncio.run(run())
    finally:
        server.shutdown()
        server.server_close()
