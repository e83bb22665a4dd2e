"""How a worker's idle slots share the waiting, without asking Redis in turn.

Each shard has one watch: the idle slot holding it blocks on that shard's queue in
Redis (BLMOVE, on a connection of its own), so a job pushed anywhere wakes a slot at
once. Every other idle slot waits on the doorbell, in the process, costing nothing. A
slot that takes a job rings once (a watcher gives its watch back first), which wakes
one waiting slot: it sweeps the shards, rings again if it found a job, and otherwise
takes over a free watch or goes back to waiting. So the slots at work double while jobs
keep coming (a fan-out of ten thousand deliveries has thousands of slots on it within
a few round trips), every shard is watched again within a round trip of its watcher
leaving, and idle slots make no calls at all.
"""

from __future__ import annotations

import asyncio


class Doorbell:
    def __init__(self, shards: int, first: int = 0) -> None:
        self._cond = asyncio.Condition()
        self._rings = 0
        self._closed = False
        self.first = first % shards  # where this process's slots start their sweeps
        self._cap = 256  # more pending rings than that are wasted sweeps
        # free watches, in the order slots take them (processes start at different ones)
        self._free = [(self.first + n) % shards for n in range(shards)]

    async def ring(self) -> None:
        async with self._cond:
            if self._rings < self._cap:
                self._rings += 1
                self._cond.notify()

    async def wait(self) -> bool:
        """True when rung (the slot should sweep), False when the bell was closed."""
        async with self._cond:
            while not self._rings and not self._closed:
                await self._cond.wait()
            if self._rings:
                self._rings -= 1
                return True
            return False

    async def close(self) -> None:
        """Stop: every waiting slot wakes, and none waits again."""
        async with self._cond:
            self._closed = True
            self._cond.notify_all()

    def claim(self) -> int | None:
        """A shard nobody watches, now watched by the caller; None when all are."""
        return self._free.pop(0) if self._free else None

    def release(self, shard: int) -> None:
        self._free.append(shard)
