"""Whether this worker's own event loop was late: a tick every LAG_TICK_S notes when one
ran LAGGED_S behind its time.

A connect that timed out while the loop itself was late may have completed unseen, and
says nothing of its origin: 10,000 deliveries begun at once kept a worker's loop busy
for longer than BUSY_CONNECT_S (app/delivery/gate.py), and their connects, taken at
once by the kernel, looked refused, which cut the origin's limit
(app/delivery/origin_limit.py) for no fault of the origin's.
"""

from __future__ import annotations

import asyncio
import time

LAG_TICK_S = 0.02  # how often the event loop's own lateness is looked at
LAGGED_S = 0.05  # a tick this late: the loop was too busy to see a connect complete


class LoopLag:
    """Started by the first start() in a running loop; stop() ends the ticks."""

    def __init__(self) -> None:
        self._lagged_at = 0.0  # when a tick last ran LAGGED_S late (monotonic)
        self._ticking: asyncio.TimerHandle | None = None

    def start(self) -> None:
        if self._ticking is None:
            due = asyncio.get_running_loop().time() + LAG_TICK_S
            self._ticking = asyncio.get_running_loop().call_at(due, self._tick, due)

    def since(self, started: float) -> bool:
        """The loop was late at some time from `started` (monotonic) until now: a tick
        ran late since, or the next one is overdue now (not yet run)."""
        ticking = self._ticking
        overdue = ticking is not None and (
            ticking.when() < asyncio.get_running_loop().time() - LAGGED_S
        )
        return self._lagged_at >= started or overdue

    def stop(self) -> None:
        if self._ticking is not None:
            self._ticking.cancel()

    def _tick(self, due: float) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if now - due > LAGGED_S:
            self._lagged_at = time.monotonic()
        self._ticking = loop.call_at(now + LAG_TICK_S, self._tick, now + LAG_TICK_S)
