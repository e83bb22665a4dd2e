"""What one callback origin (scheme, host, port) is asked to take from a worker process:
at most its limit of connections open (in use or kept alive), which starts at
BUSBAR_ORIGIN_CONNECTIONS and adapts to how the origin takes them, up to
BUSBAR_ORIGIN_CONNECTIONS_MAX (app/delivery/origin_limit.py), and at most
BUSBAR_ORIGIN_CONNECTING of them being opened at once.

Without a bound the engine opened a connection per subscriber at once: a thousand
subscribers whose callbacks share one ordinary threaded server (accept backlog 5) sent
it a thousand SYNs together; its full accept queue dropped most, their connects waited
out the kernel's SYN retries (1 s, 3 s, 7 s...), failed and backed off, and the last
event arrived 21.9 s after its publish. Bounded, the deliveries past the bound wait
their turn for a connection of that origin, in order: one released after an answer is
handed to the first waiter (kept alive, no new connect); a connection closed or opened
lets the first waiter open one (app/delivery/origins.py keeps the gates).

A delivery waits at most its `wait_s` (app/delivery/callback.py), not counted in
BUSBAR_TIMEOUT: past it the origin is busy (OriginBusy), which the send step holds back
like a Retry-After rather than failing it. The counts live in this process only: N
workers may open N times the bound, which docs/delivery.md says for a receiver fleet.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

from app.delivery.http1 import Connection
from app.delivery.origin_limit import OriginLimit

BUSY_CONNECT_S = 0.1  # the shortest a connect to an origin that is alive is given
RATE_WINDOW_S = 1.0  # the answer rate's window
RATE_FIRST = 4  # answers before a first rate is known
RATE_STALE_S = 3.0  # a rate counted longer ago than this is not used


@dataclass(frozen=True)
class Limits:
    open: int = 64  # BUSBAR_ORIGIN_CONNECTIONS: where each origin's limit starts
    connecting: int = 4  # BUSBAR_ORIGIN_CONNECTING
    most: int = 0  # BUSBAR_ORIGIN_CONNECTIONS_MAX: the ceiling; 0, below `open`: fixed

    def start(self) -> OriginLimit:
        return OriginLimit(float(self.open), max(self.open, self.most))


@dataclass
class Gate:
    """One origin's connections in this process, and the deliveries waiting for one.
    A waiter's future is answered with a connection handed over, or None: open one."""

    limit: OriginLimit
    open: int = 0  # connected, in use or idle (opening ones not included)
    connecting: int = 0
    woken: int = 0  # waiters given their turn to connect, not yet connecting: room held
    connect_s: float = 0.0  # what a connect to it takes, a moving average
    counted_from: float = 0.0  # answers counted since (monotonic), for between_s
    counted: int = 0
    between_s: float = 0.0  # the time between two answers lately (1 / the answer rate)
    waiters: deque[asyncio.Future[Connection | None]] = field(default_factory=deque)

    def may_connect(self, limits: Limits) -> bool:
        coming = self.connecting + self.woken
        return self.open + coming < self.limit.connections and coming < limits.connecting

    def connected_in(self, seconds: float) -> None:
        """A connect took `seconds`: into the moving average, the first one its start
        (from 0, a 250 ms link's second connect was given up at 0.2 s as if refused)."""
        self.connect_s += (seconds - self.connect_s) / (8 if self.connect_s else 1)

    def prompt_s(self) -> float:
        """How long a connect to this origin may take while others to it are open (it is
        alive): a few times what its connects take, at least BUSY_CONNECT_S (twice the
        event loop's lateness that counts, app/delivery/loop_lag.py: a connect taken at
        once and seen late by a loop less late than that is still in time). 0.2 s held
        the four connects of a burst that a threaded server's full accept queue dropped
        for 0.2 s each; 1,000 deliveries to it had p99 1.2 s against 0.87 s at 0.1 s."""
        return max(BUSY_CONNECT_S, 4 * self.connect_s)

    def pressed(self) -> bool:
        """Deliveries wait because the limit is reached (not only for a turn to open one:
        a burst under the limit waits for BUSBAR_ORIGIN_CONNECTING, and shows nothing)."""
        return bool(self.waiters) and self.open + self.connecting >= self.limit.connections - 1

    def growing(self) -> bool:
        """The limit grows fast (no sign of trouble yet) and has room to."""
        return self.limit.fast and self.limit.connections < self.limit.ceiling

    def turn_in_s(self, now: float) -> float:
        """About how long a delivery joining the line now waits for its turn: the line
        ahead of it at the rate the origin answers (0 while that is not known, or was
        last counted over RATE_STALE_S ago: a rate from a trickle long past is none).

        That rate is the faster of the one counted and what the connections open carry
        at the origin's answer time (Little's law: open / round trip). A count is the
        answers of a window, and answers come in bursts, one per connection, a round
        trip apart: a first window of RATE_FIRST answers that spanned a gap between two
        bursts (4 answers in 0.2 s, 4,096 connections open answering in 1 s) said 20 a
        second where there were 4,000, and held 904 deliveries back 30 s each
        (MAX_TURN_S) whose turn came within a second. Too fast a rate costs a delivery
        a wait of `wait_s` and one more begin; too slow, a hold of up to 30 s."""
        if now - self.counted_from > RATE_STALE_S:
            return 0.0
        between = self.between_s
        if self.open and self.limit.round_s:
            between = min(between, self.limit.round_s / self.open)
        return (len(self.waiters) + 1) * between

    def answered(self, now: float) -> None:
        """Counted over windows of RATE_WINDOW_S (the first from RATE_FIRST answers):
        answers come in bursts (one per connection, together), which a moving average
        of the gaps took for a rate several times too high."""
        if not self.counted_from or now - self.counted_from > RATE_STALE_S:
            # the first answer, or the first after a pause: a window over the pause
            # would say one answer in seconds (5,000 deliveries held back 6 s for it)
            self.counted_from, self.counted, self.between_s = now, 0, 0.0
            return
        self.counted += 1
        elapsed = now - self.counted_from
        if elapsed >= RATE_WINDOW_S or (not self.between_s and self.counted >= RATE_FIRST):
            self.between_s = elapsed / self.counted
            self.counted_from, self.counted = now, 0

    def over(self) -> bool:
        """More open than the limit allows now (it was cut): a released one closes."""
        return self.open > self.limit.connections

    def idle(self) -> bool:
        return not (self.open or self.connecting or self.woken or self.waiters)

    def hand_over(self, connection: Connection | None) -> bool:
        """Give the first waiter still waiting `connection` (None: its turn to connect,
        its room held in `woken` until it connects or gives the turn back); False when
        nobody waits."""
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                self.woken += connection is None
                return True
        return False

    def wake(self, limits: Limits) -> None:
        """As many waiters as there is room to connect for: the limit may have grown by
        more than one (it doubles each round trip while the origin copes), and waking
        one a time held a burst of 1,000 deliveries of 50 ms to a few hundred at once."""
        while self.waiters and self.may_connect(limits) and self.hand_over(None):
            pass
