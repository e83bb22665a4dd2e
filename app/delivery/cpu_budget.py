"""The slow lane's share of a core (app/delivery/shaper.py): a bucket of CPU time that
fills at BUSBAR_TRANSFORM_SLOW_MS a second, up to one evaluation's time bound, and
that each batch shaped in the lane empties by the CPU time it took.

Why a share, and not only a process of its own with a low priority: a transform that
runs to its time bound five times a second takes a quarter of a core, and on a machine
with as few cores as busy processes (the web, the worker, Redis, the receivers) that
quarter moved a healthy subscriber's p99 by 1.3-1.8x whatever the lane's niceness, and
further under SCHED_IDLE (docs/transforms.md). Held to its share, the lane runs a
time-out every few seconds; its other batches (quick evaluations) cost it next to
nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

SHORTEST_WAIT_MS = 50  # a hold shorter than this costs more scripts than it saves


class CpuBudget:
    """Filled at `per_s` CPU-seconds a second up to `most_s`. A batch may run while
    something is left (it may then overdraw by up to its own time); a batch that finds
    the budget overdrawn waits until it is back above nothing."""

    def __init__(
        self, per_s: float, most_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._per_s = per_s
        self._most_s = most_s
        self._clock = clock
        self._left_s = most_s
        self._at = clock()

    def left_s(self) -> float:
        """CPU-seconds a batch may take now (0 when overdrawn)."""
        return max(0.0, self._refilled())

    def wait_ms(self) -> int:
        """0 when a batch may run now; else how long until one may."""
        left = self._refilled()
        if left > 0:
            return 0
        return max(SHORTEST_WAIT_MS, math.ceil(-left / self._per_s * 1000) + 1)

    def spend(self, cpu_s: float) -> None:
        self._refilled()
        self._left_s -= cpu_s

    def _refilled(self) -> float:
        now = self._clock()
        self._left_s = min(self._most_s, self._left_s + (now - self._at) * self._per_s)
        self._at = now
        return self._left_s
