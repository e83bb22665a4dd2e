"""How a worker's idle delivery threads share the waiting, without asking Redis in turn.

Each shard has one watch: the idle thread holding it blocks on that shard's queue in
Redis (BLMOVE), so a job pushed anywhere wakes a thread at once. Every other idle thread
waits on the doorbell, here in the process, costing nothing. A thread that takes a job
rings once (and a watcher gives its watch back first), which wakes one waiting thread:
it sweeps the shards, rings again if it found a job, and otherwise takes over a free
watch or goes back to waiting. So the threads at work double while jobs keep coming (a
fan-out of a thousand deliveries has a hundred threads on it within a few round trips),
every shard is watched again within a round trip of its watcher leaving, and idle
threads make no calls at all.
"""

from __future__ import annotations

import threading


class Doorbell:
    def __init__(self, shards: int, first: int = 0) -> None:
        self._cond = threading.Condition()
        self._rings = 0
        self.first = first % shards  # where this process's threads start their sweeps
        self._cap = 64  # more pending rings than that are wasted sweeps
        # free watches, in the order threads take them (processes start at different ones)
        self._free = [(self.first + n) % shards for n in range(shards)]

    def ring(self) -> None:
        with self._cond:
            if self._rings < self._cap:
                self._rings += 1
                self._cond.notify()

    def wait(self, timeout: float) -> bool:
        """True when rung (the thread should sweep), False after `timeout` seconds."""
        with self._cond:
            if not self._rings:
                self._cond.wait(timeout)
            if self._rings:
                self._rings -= 1
                return True
            return False

    def claim(self) -> int | None:
        """A shard nobody watches, now watched by the caller; None when all are."""
        with self._cond:
            return self._free.pop(0) if self._free else None

    def release(self, shard: int) -> None:
        with self._cond:
            self._free.append(shard)
