"""Connections per origin, bounded (app/delivery/gate.py, origins.py), on the engine's
client against real servers on loopback: no more connections open or opening than the
bounds, the rest waiting their turn and taking released connections, a wait past its
bound an OriginBusy, and an origin that drops a new connection while others to it are
open busy rather than down."""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from app.delivery.callback import CallbackClient, Timeouts, tls_context
from app.delivery.dialer import Origin
from app.delivery.gate import BUSY_CONNECT_S, Gate, Limits
from app.delivery.origins import Origins
from app.errors import OriginBusy
from app.models.callback_policy import LOOPBACK_OPEN


class Server:
    """Answers each POST 200 after `answer_s`; counts connections, most open at once."""

    def __init__(self, answer_s: float, keep_alive: bool = True) -> None:
        self.answer_s, self.keep_alive = answer_s, keep_alive
        self.accepted = self.open = self.most_open = self.answered = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                await asyncio.sleep(self.answer_s)
                close = b"" if self.keep_alive else b"Connection: close\r\n"
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n" + close + b"\r\n")
                await writer.drain()
                self.answered += 1
                if not self.keep_alive:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open -= 1
            writer.close()


@asynccontextmanager
async def client_of(
    server: Server, limits: Limits, wait_s: float = 10.0
) -> AsyncIterator[tuple[CallbackClient, str]]:
    listener = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    client = CallbackClient(
        policy=LOOPBACK_OPEN, timeouts=Timeouts(2.0, 20.0, wait_s), limits=limits
    )
    try:
        yield client, f"http://127.0.0.1:{port}/in"
    finally:
        await client.close()
        listener.close()


async def deliver(client: CallbackClient, url: str) -> int | str:
    try:
        connection = await client.connection(url)
    except OriginBusy:
        return "busy"
    answer = await client.exchange(url, b"[]", {}, "u", connection)
    return answer.status


@pytest.mark.parametrize("keep_alive", [True, False])
def test_many_deliveries_to_one_origin_share_its_bounded_connections(keep_alive: bool):
    """40 deliveries at once to one origin with at most 3 connections: all answered 200;
    the server never has more than 3 open. Kept alive, those 3 carry all 40 (each
    released connection goes to the next in line); closed after each answer, every
    delivery opens one, 3 at most at a time."""

    async def run() -> None:
        server = Server(0.02, keep_alive)
        async with client_of(server, Limits(open=3, connecting=2)) as (client, url):
            statuses = await asyncio.gather(*(deliver(client, url) for _ in range(40)))
        assert statuses == [200] * 40
        assert server.most_open <= 3 and server.answered == 40
        assert server.accepted == (3 if keep_alive else 40)

    asyncio.run(run())


def test_unbounded_the_same_deliveries_open_a_connection_each():
    """The contrast: without a bound, 40 deliveries at once open 40 connections."""

    async def run() -> None:
        server = Server(0.05)
        async with client_of(server, Limits(open=1 << 20, connecting=1 << 20)) as (c, url):
            assert await asyncio.gather(*(deliver(c, url) for _ in range(40))) == [200] * 40
        assert server.accepted == 40 and server.most_open == 40

    asyncio.run(run())


def test_a_wait_past_its_bound_is_origin_busy_and_the_line_moves_on():
    """One connection, answers taking 0.3 s, waits of at most 0.45 s: of four at once the
    first two are served (the second waited 0.3 s), the last two are busy. The origin's
    connection is still there for the next delivery."""

    async def run() -> None:
        server = Server(0.3)
        async with client_of(server, Limits(open=1, connecting=1), wait_s=0.45) as (c, url):
            statuses = await asyncio.gather(*(deliver(c, url) for _ in range(4)))
            assert sorted(statuses, key=str) == [200, 200, "busy", "busy"]
            assert await deliver(c, url) == 200
        assert server.accepted == 1

    asyncio.run(run())


def test_a_delivery_whose_turn_is_far_off_is_held_back_at_once_until_about_then():
    """Two connections, answers in 0.1 s (20 a second), waits of at most 0.8 s: 30
    deliveries queue; once 8 are answered (0.4 s in) 10 more come, behind about 22 in
    line (1.1 s's worth). They do not wait 0.8 s holding a slot only to be held back
    and begun again: each is OriginBusy at once, its delay about the line's time, so it
    comes back about when its turn does. (Waited for by the answers, not a fixed sleep:
    make test's load once stretched a sleep of 0.5 s past the first ones' own bound of
    0.5 s, and the line they had made was gone.)"""

    async def run() -> None:
        server = Server(0.1)
        async with client_of(server, Limits(open=2, connecting=2), wait_s=0.8) as (c, url):
            first = [asyncio.create_task(deliver(c, url)) for _ in range(30)]
            while server.answered < 8:  # the client has the rate from its 5th answer
                await asyncio.sleep(0.005)
            late: list[tuple[float, int]] = []
            for _ in range(10):
                began = asyncio.get_running_loop().time()
                try:
                    await c.connection(url)
                    raise AssertionError("a connection, past a second-long line")
                except OriginBusy as exc:
                    late.append((asyncio.get_running_loop().time() - began, exc.delay_ms))
            await asyncio.gather(*first)
        assert all(took < 0.05 for took, _ in late), late  # decided at once
        assert all(500 < delay < 2500 for _, delay in late), late  # about a second

    asyncio.run(run())


def test_an_origin_that_drops_new_connections_while_others_are_open_is_busy():
    """A server whose accept queue is full (it listens with a backlog of 1 and never
    accepts): the connections the kernel completed are open; the next connect gets no
    answer. With those open, it is given up after BUSY_CONNECT_S and the delivery waits
    for a released connection instead, then is OriginBusy (held back, not failed) at the
    end of its wait, long before the connect timeout. From a process with none open to
    it, the same connect is a failure at the connect timeout."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            origin = Origin(False, "127.0.0.1", listener.getsockname()[1])
            origins = Origins(LOOPBACK_OPEN, tls_context(False), 3.0, Limits(64, 64))
            opened = []
            started = loop.time()
            with pytest.raises(OriginBusy):
                for _ in range(20):
                    started = loop.time()
                    opened.append(await origins.connection(origin, 1.0))
            assert opened  # the queue took some before it was full
            assert 0.9 < loop.time() - started < 2.0
            alone = Origins(LOOPBACK_OPEN, tls_context(False), 0.5, Limits(64, 64))
            with pytest.raises(TimeoutError):
                await alone.connection(origin, 1.0)
            for connection in opened:
                connection.close()
            origins.close()

    asyncio.run(run())


def test_a_connection_kept_while_a_connect_failed_is_taken_not_waited_past():
    """A delivery whose connect an origin's full accept queue dropped, while the only
    other connection to it was released with nobody in line (so kept alive, handed to
    no one): it takes that connection at once rather than wait its whole wait in a line
    nothing would ever move (500 deliveries to a small threaded server left 2 of them
    held back 30 s)."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        with socket.socket() as listener, socket.socket() as filler:
            listener.bind(("127.0.0.1", 0))
            listener.listen(0)  # the kernel completes one connection, then drops SYNs
            origin = Origin(False, "127.0.0.1", listener.getsockname()[1])
            origins = Origins(LOOPBACK_OPEN, tls_context(False), 3.0, Limits(64, 64))
            first = await origins.connection(origin, 5.0)
            filler.setblocking(False)
            assert filler.connect_ex(listener.getsockname()) in (0, errno.EINPROGRESS)
            began = loop.time()
            second = asyncio.create_task(origins.connection(origin, 5.0))
            await asyncio.sleep(0.05)
            assert not second.done()  # connecting: its SYN is dropped
            origins.release(origin, first)
            assert await asyncio.wait_for(second, 3.0) is first
            assert loop.time() - began < 1.0
            first.close()
            origins.close()

    asyncio.run(run())


def test_closing_a_connection_frees_its_place_for_the_next_in_line():
    """A delivery waiting for the origin's only connection gets its turn when that
    connection closes (here: cut mid-answer by a deadline), not when its wait ends."""

    async def run() -> None:
        server = Server(5.0)
        async with client_of(server, Limits(open=1, connecting=1), wait_s=3.0) as (c, url):
            first = await c.connection(url)
            waiting = asyncio.create_task(c.connection(url))
            await asyncio.sleep(0.1)
            assert not waiting.done()
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await c.exchange(url, b"[]", {}, "u", first)
            second = await asyncio.wait_for(waiting, 1.0)
            assert second is not first and not second.closed
            second.close()

    asyncio.run(run())


def test_a_far_origins_connects_are_judged_by_their_own_time():
    """The average a connect is judged by starts at the first connect's time: from 0,
    a 250 ms link's second connect was given up (as if its accept queue were full) at
    0.2 s. A near origin's are given BUSY_CONNECT_S at least."""
    far = Gate(Limits().start())
    far.connected_in(0.25)
    assert far.prompt_s() >= 0.9
    for _ in range(50):
        far.connected_in(0.25)
    assert 0.9 < far.prompt_s() < 1.1
    near = Gate(Limits().start())
    near.connected_in(0.0002)
    assert near.prompt_s() == BUSY_CONNECT_S


def test_the_answer_rate_is_counted_in_windows_and_forgotten_over_a_pause():
    """Answers in bursts (one per connection at once) still give their rate; a pause
    between two fan-outs gives none, rather than one answer in seconds."""
    gate = Gate(Limits(2, 2).start())
    for i in range(20):  # pairs of answers every 0.1 s: 20 a second
        gate.answered(100 + i * 0.1)
        gate.answered(100 + i * 0.1)
    assert 0.03 < gate.between_s < 0.07, gate.between_s
    gate.waiters.extend([asyncio.Future] * 9)  # type: ignore[list-item]  # counted only
    assert 0.3 < gate.turn_in_s(102.0) < 0.7
    assert gate.turn_in_s(110.0) == 0.0  # counted too long ago
    gate.answered(110.0)  # the first answer after a pause
    assert gate.between_s == 0.0 and gate.turn_in_s(110.0) == 0.0


def test_a_line_behind_many_connections_is_not_judged_by_a_window_that_spanned_a_gap():
    """4,096 connections open, answering in 1 s: about 4,000 answers a second, in bursts
    a round trip apart. A first window after a pause whose 4 answers spanned the gap
    before a burst (0.2 s) counted 20 a second, and the 2,425 deliveries in line were
    held back 30 s each, where their turn came within a second (a warm worker's second
    fan-out of 10,000 to one gateway: 904 of them 31 s late). The connections open at
    the answer time bound the wait from above."""
    gate = Gate(Limits(64, 64, 4096).start())
    gate.open = 4096
    for _ in range(200):
        gate.limit.answered(50.0, 1.0, 200, False, 4096)  # the origin answers in 1 s
    gate.answered(100.0)  # the first answer after a pause
    for at in (100.1, 100.15, 100.207, 100.207):
        gate.answered(at)
    assert 0.04 < gate.between_s < 0.06  # what the window counted: 20 a second
    gate.waiters.extend([asyncio.Future] * 2425)  # type: ignore[list-item]  # counted only
    assert 0.4 < gate.turn_in_s(100.3) < 0.8  # 2,426 at ~4,000 a second
    gate.open = 2  # two connections answering in 1 s: the window's rate is the faster
    assert 100 < gate.turn_in_s(100.3) < 130
