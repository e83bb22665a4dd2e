"""A connect given up only because the worker's own event loop was late (app/delivery/
loop_lag.py) is tried again at once, on the worker's own loop (uvloop, whose timers run
before it polls sockets: a connect the kernel completed in time is seen after its
timeout has fired)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable

import pytest

from app.delivery.callback import tls_context
from app.delivery.dialer import Origin
from app.delivery.engine import loop_factory
from app.delivery.gate import BUSY_CONNECT_S, Limits
from app.delivery.origins import Origins
from app.errors import OriginBusy
from app.models.callback_policy import LOOPBACK_OPEN

LATE_S = 0.3  # the loop held this long: three times BUSY_CONNECT_S


def on_worker_loop(run: Callable[[], Awaitable[None]]) -> None:
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(run())


def test_a_connect_the_busy_loop_saw_late_is_tried_again_not_sent_to_wait_in_line():
    """An origin that takes every connect at once (its kernel completes them), one
    connection to it open, and the loop held for LATE_S while a second connect is under
    way (a fan-out's thousands of begins do that): the connect's BUSY_CONNECT_S ends
    before the loop sees it taken. It used to be OriginBusy: the delivery waited in
    line for a connection an answer would release (here none: held back at the end of
    its wait, a second), and in a fan-out to origins answering in 1 s, deliveries came
    5-18 s late. Now it connects again at once, and the origin's limit is not cut."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(128)  # never accepts: the kernel's queue takes the connects
            origin = Origin(False, "127.0.0.1", listener.getsockname()[1])
            origins = Origins(LOOPBACK_OPEN, tls_context(False), 3.0, Limits(64, 4))
            first = await origins.connection(origin, 1.0)
            await asyncio.sleep(0.05)  # the loop's lateness ticks are running
            limit = origins.report(1)[0].limit
            began = loop.time()
            second = asyncio.create_task(origins.connection(origin, 1.0))
            # right after its first step sent the SYN, before the loop polls again: the
            # loop is late (a long stretch of other work)
            loop.call_soon(time.sleep, LATE_S)
            connection = await asyncio.wait_for(second, 3.0)
            assert connection is not first
            assert loop.time() - began < 1.0  # not its wait in line for a released one
            assert origins.report(1)[0].limit == limit
            assert LATE_S > 2 * BUSY_CONNECT_S
            first.close()
            connection.close()
            origins.close()

    on_worker_loop(run)


def test_a_connect_the_origin_really_dropped_is_still_busy_one_look_later():
    """The same late loop, but the origin's accept queue is full (it drops the SYN): the
    second look sees nothing either, and the delivery waits in line and is held back
    (OriginBusy) as before, within its wait, long before the connect timeout."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        with socket.socket() as listener, socket.socket() as filler:
            listener.bind(("127.0.0.1", 0))
            listener.listen(0)  # the kernel completes one connection, then drops SYNs
            origin = Origin(False, "127.0.0.1", listener.getsockname()[1])
            origins = Origins(LOOPBACK_OPEN, tls_context(False), 3.0, Limits(64, 4))
            first = await origins.connection(origin, 1.0)
            filler.setblocking(False)
            filler.connect_ex(listener.getsockname())  # the queue is full now
            await asyncio.sleep(0.05)
            began = loop.time()
            second = asyncio.create_task(origins.connection(origin, 1.0))
            loop.call_soon(time.sleep, LATE_S)
            with pytest.raises(OriginBusy):
                await asyncio.wait_for(second, 3.0)
            assert 0.9 < loop.time() - began < 2.9  # its wait, not the connect timeout (3 s)
            first.close()
            origins.close()

    on_worker_loop(run)
