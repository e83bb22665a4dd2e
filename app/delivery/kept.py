"""Kept-alive connections to callback origins, idle between two requests
(app/delivery/origins.py hands them out and takes them back).

- A list per origin, the last used first: the connection most likely still open, and
  the others age out.
- Closed once idle KEEP_ALIVE_S (looked over every SWEEP_S at most): a subscriber
  called once does not hold a socket forever.
- A cache, not a need, within a budget: the worker's open-files limit less
  app/limits.py's SPARE (Redis connections, logs, a transform pool's pipes). A
  connection released past it is closed, not kept, and a connect past it first closes
  the longest idle (room()); one that finds the process out of descriptors all the
  same (EMFILE) closes more, or is held back (dialed()). The worker's open-files
  limit is sized for its deliveries in flight (twice BUSBAR_DELIVERY_CONCURRENCY,
  app/limits.py), not for those plus what stays idle: a fan-out to one gateway leaves
  up to its limit (4,096) idle for 15 s, and a fan-out to other origins right after
  would have met EMFILE on its connects, each a failed attempt of a subscriber that
  did nothing wrong, for sockets nobody was using.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import sys
import time
from collections.abc import Callable
from itertools import chain

from app.delivery.backpressure import MIN_WAIT_MS
from app.delivery.dialer import Dialer, Origin
from app.delivery.http1 import Connection
from app.errors import OutOfFiles
from app.limits import SPARE

log = logging.getLogger(__name__)
KEEP_ALIVE_S = 15.0  # an idle connection is closed after this long
SWEEP_S = 5.0  # how often idle connections are looked over, at most
OUT_OF_FILES = frozenset({errno.EMFILE, errno.ENFILE})  # the process's, or the system's
EVICTED = 64  # kept connections closed for a connect that met OUT_OF_FILES, at least
WARN_EVERY_S = 10.0  # how often closing them for room is logged, at most


class Kept:
    def __init__(self, spare: int = SPARE) -> None:
        """`spare`: descriptors left to the rest of the process."""
        self._idle: dict[Origin, list[Connection]] = {}
        self._swept = time.monotonic()
        self._spare = spare
        self._warned = -WARN_EVERY_S

    def budget(self) -> int:
        """Callback connections, in use and idle, the open-files limit has room for
        beside the spare (read each time: an operator may raise it under a running
        process)."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        return sys.maxsize if soft == resource.RLIM_INFINITY else soft - self._spare

    def room(self, open_: int) -> int:
        """Before a connect while `open_` callback connections are open: the idle ones
        past the budget closed; how many."""
        over = open_ + 1 - self.budget()
        return self.evict(over) if over > 0 and self._idle else 0

    async def dialed(
        self, dialer: Dialer, origin: Origin, timeout: float, open_: int
    ) -> Connection:
        """The dialer's connect while `open_` callback connections are open, the idle
        ones past the budget closed first; one that finds the process out of
        descriptors all the same closes the longest idle and tries again. Out of them
        with none to close, or again: OutOfFiles, held back and not failed, as the
        worker's own shortage is not the subscriber's failure."""
        self._closed_for_room(self.room(open_))
        retried = False
        while True:
            try:
                return await dialer.connect(origin, timeout)
            except OSError as exc:
                if exc.errno not in OUT_OF_FILES:
                    raise
                closed = 0 if retried else self.evict(max(EVICTED, self.count() // 4))
                self._closed_for_room(closed)
                if not closed:
                    raise OutOfFiles("this worker has no descriptor free", MIN_WAIT_MS) from exc
            retried = True
            await asyncio.sleep(0.01)  # the closed sockets' descriptors are freed by the loop

    def _closed_for_room(self, closed: int) -> None:
        now = time.monotonic()
        if closed and now - self._warned >= WARN_EVERY_S:
            self._warned = now
            log.warning(
                "at the open-files limit: closed %d kept-alive callback connections "
                "(raise the open-files limit, or lower BUSBAR_DELIVERY_CONCURRENCY)", closed,
            )  # fmt: skip

    def take(self, origin: Origin) -> Connection | None:
        """The origin's last kept connection still fit to use, if any."""
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if fresh(connection, time.monotonic()):
                return connection
            connection.close()
        return None

    def keep(self, origin: Origin, connection: Connection, open_: int) -> None:
        """Kept for the origin's next request, or closed when the `open_` callback
        connections (this one included) are past the budget."""
        if open_ > self.budget():
            connection.close()
            return
        now = connection.idle_since = time.monotonic()
        self._idle.setdefault(origin, []).append(connection)
        if now - self._swept > SWEEP_S:
            self._sweep(now)

    def count(self) -> int:
        return sum(len(idle) for idle in self._idle.values())

    def evict(self, most: int) -> int:
        """Close up to `most` of the connections idle longest, whatever their origin;
        how many were closed."""
        oldest = sorted(chain.from_iterable(self._idle.values()), key=lambda c: c.idle_since)
        gone = {id(connection) for connection in oldest[:most]}
        return self._drop(lambda connection: id(connection) in gone)

    def _sweep(self, now: float) -> None:
        self._swept = now
        self._drop(lambda connection: not fresh(connection, now))

    def _drop(self, gone: Callable[[Connection], bool]) -> int:
        """Close and forget the idle connections `gone` picks; how many."""
        dropped = 0
        for origin, idle in list(self._idle.items()):
            kept = []
            for connection in idle:
                if gone(connection):
                    connection.close()
                    dropped += 1
                else:
                    kept.append(connection)
            if kept:
                self._idle[origin] = kept
            else:
                del self._idle[origin]
        return dropped

    def close(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()


def fresh(connection: Connection, now: float) -> bool:
    """Still open, and idle for less than KEEP_ALIVE_S: fit to carry another request."""
    return not connection.closed and now - connection.idle_since < KEEP_ALIVE_S
