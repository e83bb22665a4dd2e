"""A clock the tests move: what a test waited for with time.sleep (a backoff, a TTL, a new
second for a signature's timestamp) it now moves past in one step."""

from __future__ import annotations

import time


class SetClock:
    """app/clock.py's Clock for the code under test: the wall clock in milliseconds plus
    what the test moved it by. It never reads earlier than the wall clock, so what the
    test's other parts stamp with the real time (a publish through the web app, a
    rotation) is never in its future."""

    def __init__(self) -> None:
        self.ahead_ms = 0

    def __call__(self) -> int:
        return int(time.time() * 1000) + self.ahead_ms

    def advance(self, ms: int) -> int:
        self.ahead_ms += ms
        return self()
