"""Connections to callback origins: dialed (resolved, checked and connected by
app/delivery/dialer.py), kept alive, reused, bounded, waited for.

- Kept-alive connections wait in a list per origin, the last used first, and are closed
  once idle KEEP_ALIVE_S, or sooner when a connect finds the process out of
  descriptors (app/delivery/kept.py): a subscriber called once does not hold a socket
  forever, and idle sockets never fail a delivery that needs one.
- What one origin is asked to take is bounded (app/delivery/gate.py): connections open
  and being opened; past the bound a delivery waits its turn, and a connection released
  goes to the first waiter. A connect to an origin that refuses or drops it while this
  process has others open to it is OriginBusy (held back), not a failed attempt.
- The bound adapts (app/delivery/origin_limit.py): every connect and every answer is
  told to the origin's limit, which is kept while the origin is idle
  (app/delivery/gates.py), so a busy origin's next burst starts where the last ended.
- A delivery that must wait in line may park (app/delivery/parking.py): it waits up to
  its lease instead of its wait, without its slot.
"""

from __future__ import annotations

import asyncio
import ssl
import time

from app.delivery.backpressure import MIN_WAIT_MS
from app.delivery.dialer import Dialer, Origin
from app.delivery.gate import Gate, Limits
from app.delivery.gates import Gates
from app.delivery.http1 import Connection
from app.delivery.kept import Kept
from app.delivery.loop_lag import LoopLag
from app.delivery.parking import PARKING
from app.errors import OriginBusy, OutOfFiles
from app.models.callback_policy import Policy
from app.services.origin_limits import OriginRow

MAX_TURN_S = 30.0  # the longest a delivery is held back for its turn at a busy origin


class Origins:
    def __init__(
        self,
        policy: Policy,
        tls: ssl.SSLContext,
        connect_timeout: float,
        limits: Limits = Limits(),  # noqa: B008  # frozen: one shared default is safe
    ) -> None:
        self._dialer = Dialer(policy, tls, connect_timeout)
        self._connect_timeout = connect_timeout
        self._limits = limits
        self._kept = Kept()
        self._open = 0  # callback connections open, in use or idle, every origin's
        self._gates = Gates(limits)
        self._lag = LoopLag()  # a connect timed out while the loop was late: no sign
        self._stopping = False

    def know(self, name: str, context: ssl.SSLContext) -> None:
        """The context an Origin naming this identity connects with."""
        self._dialer.know(name, context)

    async def connection(
        self, origin: Origin, wait_s: float, park_until: float | None = None
    ) -> Connection:
        """A kept-alive connection still open, else a new one within the origin's bounds,
        waiting in line for either up to wait_s (OriginBusy past it), or, parked, up to
        `park_until` (time.monotonic(); app/delivery/parking.py)."""
        self._lag.start()
        gate = self._gates.of(origin)
        kept = self._kept.take(origin)
        if kept is not None:
            return kept
        turn = not gate.waiters and gate.may_connect(self._limits)
        hurry = not turn and gate.pressed() and not gate.growing()
        loop = asyncio.get_running_loop()
        until = loop.time() + wait_s
        in_line = False
        while True:
            if turn:
                try:
                    return await self.fresh(origin, patient=False)
                except OutOfFiles:
                    raise
                except OriginBusy:  # slow to accept: wait for one released instead
                    if loop.time() >= until:
                        raise
            kept = self._kept.take(origin)  # released while it connected or was woken with
            if kept is not None:  # nobody in line: none would be handed on to it
                return kept
            if not in_line:
                in_line = True
                until += self._parked_for(origin, gate, wait_s, park_until, hurry)
            handed = await self._wait(origin, gate, until, wait_s)
            if handed is not None:
                return handed
            gate.woken -= 1  # its turn: the room it held is its own now
            turn = gate.may_connect(self._limits)  # the limit cut meanwhile: wait on

    def _parked_for(
        self, origin: Origin, gate: Gate, wait_s: float, park_until: float | None, hurry: bool
    ) -> float:
        """How much longer than wait_s a delivery joining the line waits: parked, until
        `park_until`; else none, and with `hurry` (the line waits for the limit) held
        back at once when its turn is too far (_too_long). Held back at once when the
        worker is stopping."""
        if self._stopping:
            raise OriginBusy("the worker is stopping", MIN_WAIT_MS)
        longer = 0.0 if park_until is None else park_until - time.monotonic() - wait_s
        parker = PARKING.get()
        if longer > 0 and parker is not None and parker.park():
            return longer
        if hurry:
            self._too_long(origin, gate, wait_s)
        return 0.0

    def stop_waiting(self) -> None:
        """The worker stops: every delivery waiting in a line is held back now, and those
        that would join one from now on too (a parked one's turn could come after the
        process must be gone)."""
        self._stopping = True
        for origin, gate in self._gates.items():
            for waiter in gate.waiters:
                if not waiter.done():
                    waiter.set_exception(
                        OriginBusy(f"the worker stops: {origin.host}:{origin.port}", MIN_WAIT_MS)
                    )

    def _too_long(self, origin: Origin, gate: Gate, wait_s: float) -> None:
        """OriginBusy at once, with the wait until its turn, for a delivery whose turn
        would come only past `wait_s`: it would wait that long holding a slot, be held
        back and begun again a second later, to wait again (a cycle of scripts and CPU
        that grew with the line, and lost its order); held back once for as long as the
        line ahead of it takes, it comes back about when its turn does, after those
        ahead (at most MAX_TURN_S). Only when the line waits for the limit (not for a
        turn to connect, which comes at the connect rate: a warm worker held 5,000 back
        for up to 30 s with 448 of its 4,096 open), and not while the limit grows fast:
        the line then moves faster than its rate so far says (10,000 deliveries to a
        capable origin were held back 13 s as the limit passed 300, on its way to 4,096
        a second later)."""
        turn_s = gate.turn_in_s(time.monotonic())
        if turn_s > wait_s:
            raise OriginBusy(
                f"{len(gate.waiters)} deliveries in line for {origin.host}:{origin.port}, "
                f"about {turn_s:.1f} s", int(min(turn_s, MAX_TURN_S) * 1000),
            )  # fmt: skip

    async def _wait(
        self, origin: Origin, gate: Gate, until: float, wait_s: float
    ) -> Connection | None:
        waiter: asyncio.Future[Connection | None] = asyncio.get_running_loop().create_future()
        gate.waiters.append(waiter)
        taken = False
        try:
            async with asyncio.timeout_at(until):
                handed = await waiter
            taken = True
            return handed
        except TimeoutError:
            raise OriginBusy(
                f"no connection to {origin.host}:{origin.port} free within {wait_s:g} s",
                MIN_WAIT_MS,
            ) from None
        finally:
            if not waiter.done():
                waiter.cancel()
            elif not taken and not waiter.cancelled() and waiter.exception() is None:
                # answered as it gave up: pass it on
                handed = waiter.result()
                if handed is not None:
                    self.release(origin, handed)
                else:
                    gate.woken -= 1
                    gate.wake(self._limits)
            if waiter in gate.waiters:
                gate.waiters.remove(waiter)

    async def fresh(self, origin: Origin, patient: bool = True) -> Connection:
        """A new connection, counted in the origin's gate (a kept-alive one that closed
        under a request is replaced at once, without waiting in line). Not `patient`,
        while other connections to the origin are open (it is alive): a connect is given
        up after a few times what its connects take (Gate.prompt_s), as one its
        full accept queue dropped would wait out the kernel's SYN retry (1 s), and
        OriginBusy tells the delivery to wait for a released connection instead."""
        gate = self._gates.of(origin)
        timeout = self._connect_timeout
        if not patient and gate.open:
            timeout = min(timeout, gate.prompt_s())
        gate.connecting += 1
        started = time.monotonic()
        try:
            connection = await self._kept.dialed(self._dialer, origin, timeout, self._open)
            now = time.monotonic()
            gate.connected_in(now - started)
            gate.open += 1
            self._open += 1
            connection.on_closed = lambda: self._closed(origin, gate)
            if now - started < gate.prompt_s():
                gate.limit.connected(now, gate.pressed(), gate.open, bool(gate.waiters))
            return connection
        except (TimeoutError, ConnectionRefusedError) as exc:
            if gate.open:  # others to it are open and answering: busy, not down
                lagged = isinstance(exc, TimeoutError) and self._lag.since(started)
                if not lagged:  # else the loop, not the origin, was slow: no sign
                    gate.limit.busy(time.monotonic(), gate.open)
                raise OriginBusy(
                    f"{origin.host}:{origin.port} did not take a new connection while "
                    f"{gate.open} others were open", MIN_WAIT_MS,
                ) from exc  # fmt: skip
            raise
        finally:
            gate.connecting -= 1
            self._freed(origin, gate)

    def load(self, origin: Origin) -> int:
        """Connections open to the origin now: the load a request written now meets."""
        gate = self._gates.get(origin)
        return 0 if gate is None else gate.open

    def answered(self, origin: Origin, seconds: float, status: int | None, load: int) -> None:
        """An answer (`status`; None: none within its deadline), `seconds` after its
        request was written under `load` (load()): told to the origin's limit, and a
        waiter woken if it grew."""
        gate = self._gates.get(origin)
        if gate is None:
            return
        now, before = time.monotonic(), gate.limit.connections
        gate.answered(now)
        if status is None:
            gate.limit.timed_out(now)
        else:
            gate.limit.answered(now, seconds, status, gate.pressed(), load, bool(gate.waiters))
        if gate.limit.connections > before:
            gate.wake(self._limits)  # the room it made

    def report(self, most: int) -> list[OriginRow]:
        """The `most` busiest origins (app/delivery/gates.py)."""
        return self._gates.report(most)

    def _closed(self, origin: Origin, gate: Gate) -> None:
        gate.open -= 1
        self._open -= 1
        self._freed(origin, gate)

    def _freed(self, origin: Origin, gate: Gate) -> None:
        """A connection closed, or a connect ended: waiters may open one."""
        gate.wake(self._limits)
        self._gates.drop_idle(origin, gate)

    def release(self, origin: Origin, connection: Connection) -> None:
        """Keep a connection whose last answer was read whole, for the first delivery
        waiting for one to its origin, else for the next request."""
        gate = self._gates.get(origin)
        if gate is not None and gate.over():  # its limit was cut: one fewer open
            connection.close()
            return
        if gate is not None and gate.hand_over(connection):
            return
        self._kept.keep(origin, connection, self._open)

    def close(self) -> None:
        self._lag.stop()
        self._kept.close()
