"""What every slot of one engine shares: the clients, the shards' queues, the doorbell,
and the job-queue steps a slot takes on its own pending lists (asyncio)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis as AsyncRedis

from app.clock import now_ms
from app.delivery.callback import CallbackClient
from app.delivery.doorbell import Doorbell
from app.delivery.parking import Lot
from app.delivery.share import Share
from app.delivery.steps import AsyncDelivery
from app.errors import JobLost
from app.lua import AsyncScripts, client_errors
from app.models import attempts, job_calls
from app.models.keys import Keys
from app.models.queue import Located, process_of
from app.redis_client import raw
from app.tracing import NO_TRACING, Tracing
from config.settings import Settings


@dataclass
class Room:
    settings: Settings
    keys: Keys
    worker_id: str  # the process; a slot is `<worker_id>/<n>`
    queues: list[Located]  # main of every shard (the Room moves their jobs: acquire, settle)
    redis: AsyncRedis  # a small pool, shared by every slot
    watch: AsyncRedis  # one connection per shard, for the blocking takes
    scripts: AsyncScripts
    http: CallbackClient
    doorbell: Doorbell
    tracing: Tracing = NO_TRACING  # spans of delivery attempts (app/tracing.py)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    # slots that may have named themselves in a pending index: those a clean exit takes
    # out again (most of a worker's slots never leave the doorbell)
    indexed: set[str] = field(default_factory=set)
    lot: Lot = field(default_factory=lambda: Lot(0, 0))  # deliveries parked (parking.py)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)  # the slots running

    def start(self, slot: Coroutine[Any, Any, None]) -> None:
        """Run a slot; the engine waits for every slot started, those that took a
        parked delivery's place included."""
        task = asyncio.create_task(slot)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    @functools.cached_property
    def delivery(self) -> AsyncDelivery:
        """One for every slot: the loop runs one step at a time, and one page of random
        draws serves them all (a page each would be 20 MB at 5,000 slots)."""
        s = self.settings
        share = Share(s.delivery_concurrency, s.failing_share, s.slow_after_s)
        return AsyncDelivery(
            self.keys, self.scripts, s, self.http, share=share, tracing=self.tracing
        )

    async def acquire(self, queue: Located, worker: str) -> bytes | None:
        """Block up to BUSBAR_ACQUIRE_TIMEOUT for a job into `worker`'s pending list. The
        slot names itself in the pending index first, so its list is never unknown to
        ScrubQueues; if BLMOVE's reply is lost, the slot scrubs its own list after."""
        k = queue.place
        async with client_errors():
            await self.watch.sadd(k.jobs_pending_index(queue.name), worker)
            moved = await self.watch.blmove(
                k.jobs_instant(queue.name),
                k.jobs_pending(queue.name, worker),
                self.settings.acquire_timeout,
                "RIGHT",
                "LEFT",
            )
            return None if moved is None else raw(moved)

    async def settle(self, queue: Located, worker: str, job: bytes, at: int | None) -> None:
        done = await self.scripts.run(
            job_calls.settle(queue.place, queue.name, worker, job, at, now_ms())
        )
        if not done:
            raise JobLost("the job was scrubbed while it ran")

    async def scrub_own(self, worker: str) -> None:
        """Give back whatever `worker`'s pending lists hold (after an error)."""
        await self.scrub(process_of(worker), [worker], forget=False)

    async def scrub(self, process: str, holders: list[str], *, forget: bool) -> None:
        """Give back what the holders' lists hold; a delivery cut short there is on
        record as `abandoned` (app/models/attempts.py)."""
        kept = attempts.kept(self.settings, now_ms())
        for queue in self.queues:
            for call in job_calls.scrub_many(
                queue.place, queue.name, process, holders, 0, forget, kept
            ):
                await self.scripts.run(call)

    async def pause(self, seconds: float) -> None:
        """Sleep, but wake at once when the engine stops."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), seconds)
