"""Total deadlines for callback requests, and the lease a delivery is sent under.

requests' timeouts bound each socket operation, not the request: a callback that sends a
byte every few seconds could hold a delivery thread (and its subscriber's only delivery
slot) for ever. Here each delivery thread declares a deadline for the request it is
about to make; the connection registers itself just before it sends, and one watchdog
thread per process shuts the socket down when the deadline passes, which makes the
blocked read fail at once, whatever it was waiting for, plain or TLS.

The lease: a delivery begun long ago (the process was paused, or starved) may have been
taken over by another worker after a scrub. Its request is then not sent at all, which
keeps "one delivery in flight per subscriber" to everything but a pause that falls
between this check and the first byte of the request.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from app.errors import BusbarError

POLL_S = 0.05  # how soon a deadline that passed before the socket existed is retried


class LeaseExpired(BusbarError):
    """The delivery began too long ago to be sent safely: another worker may own it now."""


@dataclass
class Limit:
    deadline: float  # time.monotonic()
    send_by: float | None
    conn: Any = None
    expired: bool = False


class Deadlines:
    """Per-thread request deadlines, enforced by one lazily started watchdog thread."""

    def __init__(self) -> None:
        self._active: dict[int, Limit] = {}
        self._wake = threading.Condition()
        self._watchdog: threading.Thread | None = None
        self._wakes_at = 0.0  # when the watchdog looks again: later deadlines need no call

    @contextmanager
    def limit(self, total_s: float, send_by: float | None = None) -> Iterator[Limit]:
        """Bound the requests this thread makes inside the block to `total_s` seconds in
        all; refuse to send any after `send_by` (time.monotonic()), when given."""
        entry = Limit(time.monotonic() + total_s, send_by)
        ident = threading.get_ident()
        with self._wake:
            self._active[ident] = entry
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch, name="deadlines", daemon=True)
                self._watchdog.start()
            if entry.deadline < self._wakes_at:
                self._wake.notify()  # it would look too late
        try:
            yield entry
        finally:
            with self._wake:
                self._active.pop(ident, None)

    def attach(self, conn: Any) -> None:
        """Called by a callback connection just before it sends a request."""
        entry = self._active.get(threading.get_ident())
        if entry is None:
            return
        if entry.send_by is not None and time.monotonic() > entry.send_by:
            raise LeaseExpired("the delivery began too long ago to be sent")
        entry.conn = conn

    def _watch(self) -> None:
        with self._wake:
            while True:
                now = time.monotonic()
                for entry in self._active.values():
                    if now >= entry.deadline:
                        entry.expired = True
                        self._cut(entry)
                waiting = [e.deadline for e in self._active.values() if not e.expired]
                pause = min(waiting, default=now + 3600) - now
                if any(e.expired for e in self._active.values()):
                    pause = min(pause, POLL_S)
                self._wakes_at = now + max(pause, 0.001)
                self._wake.wait(max(pause, 0.001))

    @staticmethod
    def _cut(entry: Limit) -> None:
        sock = getattr(entry.conn, "sock", None)
        if sock is None:
            return
        with contextlib.suppress(OSError):  # already closed: the request is over
            sock.shutdown(socket.SHUT_RDWR)
