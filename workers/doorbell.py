"""How idle delivery threads learn that work has come, without asking Redis.

A worker process has one thread per shard waiting on that shard's queue in Redis (a
blocking BLMOVE), and many more helper threads that wait here, in the process, costing
nothing. A thread that takes a job rings once, which wakes one helper; the helper sweeps
the shards, and if it finds a job it rings too. So the threads at work double while jobs
keep coming (a fan-out of a thousand deliveries has a hundred threads on it within a few
round trips), and go back to sleep as soon as a sweep comes back empty.
"""

from __future__ import annotations

import threading


class Doorbell:
    def __init__(self, helpers: int) -> None:
        self._cond = threading.Condition()
        self._rings = 0
        self._cap = max(1, helpers)  # more pending rings than helpers would be wasted sweeps

    def ring(self) -> None:
        with self._cond:
            if self._rings < self._cap:
                self._rings += 1
                self._cond.notify()

    def wait(self, timeout: float) -> bool:
        """True when rung (a helper should sweep), False after `timeout` seconds."""
        with self._cond:
            if not self._rings:
                self._cond.wait(timeout)
            if self._rings:
                self._rings -= 1
                return True
            return False
