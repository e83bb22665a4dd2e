"""Kept-alive connections (app/delivery/kept.py): the longest idle closed first, whatever
their origin; and, on the engine's client in a process short of descriptors, a connect
that meets EMFILE closes idle ones and goes on, or is held back (OriginBusy), never a
failed attempt for the subscriber."""

from __future__ import annotations

import json
import resource
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest

from app.delivery.dialer import Origin
from app.delivery.http1 import Connection
from app.delivery.kept import Kept


def test_evict_closes_the_longest_idle_across_origins():
    kept = Kept()
    a, b = Origin(False, "127.0.0.1", 1), Origin(False, "127.0.0.1", 2)
    made = {name: Connection() for name in ("a1", "b1", "a2", "b2")}
    for name, connection in made.items():
        kept.keep(a if name[0] == "a" else b, connection, 0)
    for at, name in enumerate(made):  # idle since, in that order
        made[name].idle_since = 100.0 + at
    assert kept.evict(3) == 3
    assert [n for n, c in made.items() if c.closed] == ["a1", "b1", "a2"]
    assert kept.count() == 1
    made["b2"].idle_since = 10**9  # fresh for take()
    assert kept.take(b) is made["b2"] and kept.take(a) is None


def test_past_the_budget_a_released_connection_is_closed_and_a_connect_makes_room():
    """The budget is the open-files limit less the spare left to Redis connections,
    logs and pipes: idle connections never take those."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        pytest.skip("no open-files limit: no budget")
    kept = Kept(spare=soft - 2)  # room for two callback connections
    a = Origin(False, "127.0.0.1", 1)
    first, second, third = Connection(), Connection(), Connection()
    kept.keep(a, first, 1)
    kept.keep(a, second, 2)
    kept.keep(a, third, 3)  # three open: past the budget, closed
    assert third.closed and not first.closed and kept.count() == 2
    assert kept.room(1) == 0  # one open: room for another
    assert kept.room(2) == 1 and first.closed  # two open: the longest idle goes
    assert kept.count() == 1


CLIENT = """
import asyncio, json, os, resource, sys
from app.delivery.callback import tls_context
from app.delivery.dialer import Origin
from app.delivery.engine import loop_factory
from app.delivery.gate import Limits
from app.delivery.origins import Origins
from app.errors import OriginBusy
from app.limits import SPARE
from app.models.callback_policy import LOOPBACK_OPEN

ports = [int(p) for p in sys.argv[1:]]

async def main():
    a, b, c = (Origin(False, "127.0.0.1", p) for p in ports)
    origins = Origins(LOOPBACK_OPEN, tls_context(False), 2.0, Limits(200, 8, 200))
    # the spare the budget leaves to the rest of the process, held: the connections
    # meet EMFILE before the budget, as when the process's other descriptors grew
    spare = [open("/dev/null") for _ in range(SPARE)]
    used = len(os.listdir("/proc/self/fd"))
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (used + 40, hard))
    idle = [await origins.connection(a, 5.0) for _ in range(30)]
    for connection in idle:
        origins.release(a, connection)  # kept alive, idle
    busy = [await origins.connection(b, 5.0) for _ in range(30)]  # 30 more than room for
    held = None
    for _ in range(100):  # in use, none idle: the next connects have no room
        try:
            busy.append(await origins.connection(c, 5.0))
        except OriginBusy as exc:
            held = exc.message
            break
    print(json.dumps({"b": 30, "more": len(busy) - 30, "idle_left": origins._kept.count(),
                      "held": held, "spare": len(spare)}))

factory = loop_factory()
asyncio.Runner(loop_factory=factory).run(main())
"""


@contextmanager
def listeners(n: int) -> Iterator[list[int]]:
    """Ports whose kernel completes connections nobody accepts: each costs the client
    one descriptor and nothing else."""
    with ExitStack() as stack:
        ports = []
        for _ in range(n):
            listener = stack.enter_context(socket.socket())
            listener.bind(("127.0.0.1", 0))
            listener.listen(256)
            ports.append(listener.getsockname()[1])
        yield ports


def test_a_connect_short_of_descriptors_closes_idle_ones_and_is_held_back_without_any():
    """30 connections to one origin kept idle, then 30 to another in a process with room
    for 40 descriptors: the connects that meet EMFILE close the idle ones and go on
    (before, each was a failed attempt: backoff, health, deliveries up to 33 s late).
    Then, every descriptor in use and none idle, a connect is OriginBusy: held back,
    not a failure of the subscriber's."""
    with listeners(3) as ports:
        ran = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(CLIENT), *map(str, ports)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    found = json.loads(ran.stdout.strip().splitlines()[-1])
    assert found["idle_left"] < 30  # some of the idle were closed for the new ones
    assert found["held"] == "this worker has no descriptor free"
    assert found["more"] < 20, found  # no more than the room left
