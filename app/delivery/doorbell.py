"""How a worker's idle slots share the waiting, without asking Redis in turn.

Each shard has one watch: the idle slot holding it blocks on that shard's queue in
Redis (BLMOVE, on a connection of its own), so a job pushed anywhere wakes a slot at
once. Every other idle slot waits on the doorbell, in the process, costing nothing. A
slot that takes a job rings: as many times as the sweep saw jobs still waiting, less
the slots already on their way to them (rung, or sweeping), up to CAP; and at least
once while a shard is left unwatched and no ring is pending, so a slot comes to watch
it. Each ring wakes one waiting slot, which
sweeps the shards, rings in turn if it found a job, and otherwise takes over a free
watch or goes back to waiting. So a fan-out to ten thousand subscribers has hundreds of
slots sweeping after the first take (their Redis calls queue for the engine's pool),
a lone job wakes one slot, every shard is watched again within a round trip of its
watcher leaving, and idle slots make no calls at all.
"""

from __future__ import annotations

import asyncio

CAP = 256  # rings pending at most: sweeps past the pool's reach only queue, then miss


class Doorbell:
    def __init__(self, shards: int, first: int = 0) -> None:
        self._cond = asyncio.Condition()
        self._rings = 0
        self.sweeping = 0  # slots whose sweep is under way: each will take a job it sees
        self._closed = False
        self.first = first % shards  # where this process's slots start their sweeps
        self._cap = CAP
        # free watches, in the order slots take them (processes start at different ones)
        self._free = [(self.first + n) % shards for n in range(shards)]

    async def ring(self, left: int = 1) -> None:
        """`left` jobs are waiting: wake as many slots as are not already on their way
        to them (rung and not yet awake, or sweeping), up to CAP rings pending."""
        async with self._cond:
            wanted = left - self._rings - self.sweeping
            if self._free and not self._rings:
                # a shard nobody watches (its watcher took a job, or swept and found one):
                # one slot must come to watch it, whatever the sweeps under way find
                wanted = max(wanted, 1)
            added = min(wanted, self._cap - self._rings)
            if added > 0:
                self._rings += added
                self._cond.notify(added)

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
