"""A bounded share of the engine for the failing: attempts of subscribers whose last
attempt failed (circuit open or not) and attempts in flight longer than
BUSBAR_SLOW_AFTER_S together hold at most BUSBAR_FAILING_SHARE percent of the
worker's slots. Beyond it they wait, and the rest of the slots serve healthy subscribers
at once, however many endpoints are down or hang.

- A failing subscriber's attempt takes a place in the share before it is sent. With the
  share full it is not sent: it is held back (deliver_fail's wait form, like a
  Retry-After: no attempt counted, no health lost, the batch kept at the head of its
  lane) for about BUSBAR_SLOW_AFTER_S (x0.5..1.5, so the held-back do not come back in
  step), and counted in `delivery.held_back`.
- A healthy subscriber's attempt still in flight after BUSBAR_SLOW_AFTER_S takes a
  place then; with the share full it is cut there, a failed attempt with the reason
  `cut_slow`. An endpoint that accepts and never answers therefore holds a slot for
  BUSBAR_SLOW_AFTER_S on its first attempt, and afterwards only within the share.

The count lives in the engine's memory, one per process: it bounds what this worker
sends, and a crash loses nothing (the batches are in Redis).
"""

from __future__ import annotations

import asyncio
import random

from app.models import attempt_result
from app.models.attempt_result import AttemptResult

CUT_SLOW = "cut_slow"  # the reason of an attempt cut at BUSBAR_SLOW_AFTER_S


class Share:
    def __init__(self, slots: int, percent: int, slow_after_s: float) -> None:
        self.limit = max(1, slots * percent // 100)
        self.slow_after_s = slow_after_s
        self.held = 0

    def take(self) -> bool:
        """A place for one attempt, if there is one."""
        if self.held >= self.limit:
            return False
        self.held += 1
        return True

    def give(self) -> None:
        self.held -= 1

    def held_back(self) -> AttemptResult:
        """An attempt not sent because the share is full."""
        return attempt_result.held_back(int(self.slow_after_s * 1000 * random.uniform(0.5, 1.5)))

    def watch(self, deadline: asyncio.Timeout) -> Watch:
        """Watch a healthy attempt bounded by `deadline`: at BUSBAR_SLOW_AFTER_S it takes a
        place or is cut (the deadline brought forward to now)."""
        return Watch(self, deadline)


class Watch:
    def __init__(self, share: Share, deadline: asyncio.Timeout) -> None:
        self._share = share
        self._deadline = deadline
        self.holds = False
        self.cut = False
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(share.slow_after_s, self._slow)

    def _slow(self) -> None:
        if self._share.take():
            self.holds = True
        else:
            self.cut = True
            self._deadline.reschedule(asyncio.get_running_loop().time())

    def done(self) -> None:
        self._timer.cancel()
        if self.holds:
            self.holds = False
            self._share.give()
