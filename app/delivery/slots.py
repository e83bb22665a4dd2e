"""One delivery slot: a coroutine with its own name and its own pending list per shard.

A slot takes a job into its own pending list (nothing is ever held only in memory),
delivers, and settles it through the fenced Lua steps; it checks for shutdown only
between jobs, so SIGTERM lets the delivery in hand finish (bounded by BUSBAR_TIMEOUT)
and be acknowledged or failed. A Redis error (a lost reply included: nothing is resent
blindly) and a job found `lost` (the process was taken for dead and scrubbed) end the
same way: the slot gives back whatever its own lists still hold and carries on. Only a
bug escapes the loop, and that stops the process.

A slot whose delivery must wait in line at a busy origin parks it (app/delivery/
parking.py): a new slot takes its place, and it ends once that delivery has settled.
"""

from __future__ import annotations

import logging

import redis

from app import codec
from app.clock import now_ms
from app.delivery.flight import Flight, Outcome, Taken
from app.delivery.parking import PARKING
from app.delivery.room import Room
from app.errors import JobLost
from app.models.queue import Located

log = logging.getLogger(__name__)
RETRY_MS = 1000  # a job that failed by a bug runs again after this long


class Slot:
    def __init__(self, room: Room, index: int, dirty: bool = False) -> None:
        """`dirty`: its lists may hold jobs (a name a parked slot gave back unclean). A
        slot taking a parked one's place starts waiting on the doorbell, as every slot
        past the first few does: the take that found the parked one's job rang for the
        jobs it saw left (a sweep of its own at once was a script each, 760 of them in
        a burst of 1,000 deliveries to one origin, all on the burst's event loop)."""
        self.room = room
        self.index = index
        self.worker = f"{room.worker_id}/{index}"
        self.delivery = room.delivery
        self._turn = (room.doorbell.first + index) % len(room.queues)
        # whether the next take sweeps before it waits: at start, only as many slots as
        # there are shards (they then watch them); the rest wait to be rung, so a start
        # is not thousands of sweeps at once
        self._sweeps = index < len(room.queues)
        self._dirty = dirty  # a new process's slots hold nothing yet
        self._handed: Taken | None = None  # the next job, taken by the last ack
        self._sweep: list[Located] = []  # what the running job's last ack sweeps
        self._parked = False  # its delivery parked: another slot has its place

    async def run(self) -> None:
        room = self.room
        PARKING.set(self)  # this task's own context: its deliveries may park
        while not room.stopping.is_set():
            try:
                if self._dirty:
                    self._handed = None  # given back with the rest
                    await room.scrub_own(self.worker)
                    self._dirty = False
                if self._parked and self._handed is None:
                    break
                found = await self._take()
                if found is not None:
                    await self._run(found.queue, found.job, found.flight)
            except JobLost as exc:
                log.warning("%s: %s; moving on", self.worker, exc.message)
                self._dirty = True
            except redis.RedisError as exc:
                log.warning("%s: Redis error, retrying in 1 s: %s", self.worker, exc)
                self._dirty = True
                await room.pause(1)
        if self._parked:
            room.lot.leave(self.index, self._dirty)

    def park(self) -> bool:
        """Its delivery waits for a busy origin without it: a new slot takes its place
        (app/delivery/parking.py), and the running job's ack takes no next job."""
        if self._parked:  # the run's next batch waits too: it is parked already
            return True
        room = self.room
        if room.stopping.is_set() or not room.lot.enter():
            return False
        self._parked = True
        self._sweep.clear()
        number, dirty = room.lot.name()
        room.start(Slot(room, number, dirty).run())
        return True

    async def _take(self) -> Taken | None:
        """Sweep every shard from the next one in turn, then wait as the doorbell
        arranges: watching a shard in Redis, or rung. Whoever takes a job rings for the
        jobs its sweep saw left (doorbell.py), so that many more slots come to sweep."""
        bell = self.room.doorbell
        found, self._handed = self._handed, None
        self.room.indexed.add(self.worker)  # it may name itself in a pending index now
        if found is None and self._sweeps:
            bell.sweeping += 1
            try:
                found = await self.delivery.take(self._in_turn(), self.worker)
            finally:
                bell.sweeping -= 1
        self._sweeps = True
        if found is None:
            shard = bell.claim()
            if shard is None:
                self._sweeps = await bell.wait()
                return None
            try:
                job = await self.room.acquire(self.room.queues[shard], self.worker)
            finally:
                bell.release(shard)  # before the ring: the next slot watches
            if job is None:
                return None
            # a watch does not see what is left: wake one slot to look
            found = Taken(self.room.queues[shard], job, None, left=1)
        if found is not None:
            await bell.ring(found.left)
        return found

    def _in_turn(self) -> list[Located]:
        queues = self.room.queues
        start, self._turn = self._turn, (self._turn + 1) % len(queues)
        return [*queues[start:], *queues[:start]]

    async def _run(  # a Taken's fields
        self, queue: Located, job: bytes, begun: Flight | Outcome | None
    ) -> None:
        name, args = codec.unpack_job(job)
        if name != "batch":  # queue main carries deliveries only
            log.error("%s: job %r on queue main dropped", self.worker, name)
            await self.room.settle(queue, self.worker, job, None)
            return
        try:
            (pid,) = args  # the partition the job delivers (the token at concurrency 1)
            self._sweep = self._in_turn()
            outcome = await self.delivery.run(pid, self.worker, job, begun, self._sweep)
        except (redis.RedisError, JobLost):
            raise
        except Exception:  # a bug in one delivery must not stop the others
            log.exception("%s: delivery job failed", self.worker)
            await self.room.settle(queue, self.worker, job, now_ms() + RETRY_MS)
            return
        self._handed = outcome.taken
