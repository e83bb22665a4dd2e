"""Kept-alive connections to callback origins, idle between two requests
(app/delivery/origins.py hands them out and takes them back).

- A list per origin, the last used first: the connection most likely still open, and
  the others age out.
- Closed once idle KEEP_ALIVE_S (looked over every SWEEP_S at most): a subscriber
  called once does not hold a socket forever.
- A cache, not a need: when the process is out of descriptors (EMFILE), the longest
  idle are closed for a connect that needs one (evict()). The worker's open-files
  limit is sized for its deliveries in flight (twice BUSBAR_DELIVERY_CONCURRENCY,
  app/limits.py), not for those plus what stays idle: a fan-out to one gateway leaves
  up to its limit (4,096) idle for 15 s, and a fan-out to other origins right after
  would have met EMFILE on its connects, each a failed attempt of a subscriber that
  did nothing wrong, for sockets nobody was using.
"""

from __future__ import annotations

import time
from itertools import chain

from app.delivery.dialer import Origin
from app.delivery.http1 import Connection

KEEP_ALIVE_S = 15.0  # an idle connection is closed after this long
SWEEP_S = 5.0  # how often idle connections are looked over, at most


class Kept:
    def __init__(self) -> None:
        self._idle: dict[Origin, list[Connection]] = {}
        self._swept = time.monotonic()

    def take(self, origin: Origin) -> Connection | None:
        """The origin's last kept connection still fit to use, if any."""
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if fresh(connection, time.monotonic()):
                return connection
            connection.close()
        return None

    def keep(self, origin: Origin, connection: Connection) -> None:
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
        for origin, idle in list(self._idle.items()):
            kept = [connection for connection in idle if id(connection) not in gone]
            if kept:
                self._idle[origin] = kept
            else:
                del self._idle[origin]
        for connection in oldest[:most]:
            connection.close()
        return len(gone)

    def _sweep(self, now: float) -> None:
        self._swept = now
        for origin, idle in list(self._idle.items()):
            kept = []
            for connection in idle:
                if fresh(connection, now):
                    kept.append(connection)
                else:
                    connection.close()
            if kept:
                self._idle[origin] = kept
            else:
                del self._idle[origin]

    def close(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()


def fresh(connection: Connection, now: float) -> bool:
    """Still open, and idle for less than KEEP_ALIVE_S: fit to carry another request."""
    return not connection.closed and now - connection.idle_since < KEEP_ALIVE_S
