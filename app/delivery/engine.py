"""The worker's delivery engine: one asyncio event loop, in a thread of its own, running
BUSBAR_DELIVERY_CONCURRENCY slots.

Why an event loop and not threads: a delivery spends nearly all its life waiting for
the subscriber. A thread per delivery made a hundred deliveries in flight the ceiling
of a process, and a few hundred endpoints that accept and never answer took every
thread for BUSBAR_TIMEOUT at a time, stopping the bus for everyone. A slot here is a
coroutine: waiting costs a socket and a few KiB, so thousands are in flight at once.
The heartbeat, the scheduler and the maintenance jobs keep their own threads, so a
busy loop can never make a live worker look dead.

Redis is reached through a few connections (BUSBAR_DELIVERY_REDIS_CONNECTIONS, the
script calls pipelined over them: app/lua/pipe.py) and one connection per shard for
the blocking takes: never a connection per slot.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from collections.abc import Callable
from contextlib import suppress

import redis
import redis.asyncio.cluster

from app.clock import now_ms
from app.delivery.callback import CallbackClient, client_options
from app.delivery.doorbell import Doorbell
from app.delivery.parking import Lot
from app.delivery.room import Room
from app.delivery.slots import Slot
from app.lua import AsyncScripts
from app.models.keys import MAIN, keys_for
from app.models.queue import Located, QueueAt
from app.redis_client import connect_async
from app.services import origin_limits
from app.tracing import NO_TRACING, Tracing
from app.unblock import blocking_name
from config.settings import Settings

log = logging.getLogger(__name__)
STOP_POLL_S = 0.05
# Python's cyclic collector, tuned for a heap of thousands of slots and connections. At
# its defaults (700, 10, 10) a full collection walked every slot, connection and
# delivery in flight about every 70,000 allocations: with 4,000 deliveries in flight,
# 13 full collections of 170 ms each, about 40% of the worker's CPU. With these and
# the start-up heap frozen (engine._main), measured on 4,000 subscribers x 1 s: worker
# CPU a delivery 0.70 -> 0.37 ms. Reference counting still frees nearly everything at
# once; the collector only finds cycles, later.
GC_THRESHOLDS = (20_000, 10, 10)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when installed (it is a dependency where it builds), else
    asyncio's own. Measured here: a Redis script call 85 against 104 µs of CPU, a
    callback POST 176-215 against 197-262 µs (docs/delivery.md)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


class Engine:
    def __init__(
        self,
        settings: Settings,
        worker_id: str,
        first_home: int = 0,
        tracing: Tracing = NO_TRACING,
    ) -> None:
        self.settings = settings
        self.worker_id = worker_id
        self.keys = keys_for(settings)
        self._first = first_home
        self.slots = settings.delivery_concurrency
        self.tracing = tracing

    def run(self, stop: threading.Event) -> None:
        """A ThreadGroup loop: returns once `stop` is set and every slot has settled."""
        gc.set_threshold(*GC_THRESHOLDS)
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(self._main(stop))

    async def _main(self, stop: threading.Event) -> None:
        room = self._room()
        await self._warm(room)
        for i in range(self.slots):
            room.start(Slot(room, i).run())
        await asyncio.sleep(0)  # every slot has started: what exists now lives as long as we do
        gc.freeze()
        watch = asyncio.create_task(self._stop_when(stop, room))
        reporting = asyncio.create_task(self._report_origins(room))
        try:
            while running := [task for task in room.tasks if not task.done()]:
                await asyncio.gather(*running)  # slots that took a parked one's place too
        finally:
            watch.cancel()
            reporting.cancel()
            await self._leave(room)

    async def _report_origins(self, room: Room) -> None:
        """What this process learnt of its callback origins, where GET /metrics and the
        console read it (app/services/origin_limits.py); nothing while there is none."""
        reported = False
        while True:
            await asyncio.sleep(origin_limits.ORIGINS_REPORT_S)
            rows = room.http.origins(origin_limits.ORIGINS_REPORTED)
            if not rows and not reported:
                continue
            try:
                await origin_limits.report(room.redis, self.keys, self.worker_id, rows, now_ms())
                reported = bool(rows)
            except redis.RedisError as exc:  # the next report tries again
                log.info("%s: origins not reported: %s", self.worker_id, exc)

    def _room(self) -> Room:
        settings, keys = self.settings, self.keys
        pool = settings.delivery_redis_connections
        # one Redis: no socket timeout (redis-py wraps every read and write in a task for
        # it); each script call is bounded as a whole instead (app/lua: CALL_TIMEOUT_S)
        client = connect_async(
            settings, connections=pool + 2, timeout=5.0 if settings.redis_cluster else None
        )
        watch = connect_async(
            settings,
            connections=keys.shards + 2,
            timeout=settings.acquire_timeout + 10,
            name=blocking_name(self.worker_id),
        )
        http = CallbackClient(**client_options(settings))
        queues: list[Located] = [
            QueueAt(keys, MAIN, n, settings.redis_cluster) for n in range(keys.shards)
        ]
        return Room(
            settings, keys, self.worker_id, queues, client, watch,
            AsyncScripts(
                client, pool, settings.redis_min_replicas, settings.redis_replica_timeout_ms
            ),
            http, Doorbell(keys.shards, self._first), self.tracing,
            lot=Lot(settings.delivery_concurrency, settings.delivery_concurrency),
        )  # fmt: skip

    async def _warm(self, room: Room) -> None:
        """A cluster client learns the topology before the slots start, not under the
        first thousand concurrent commands (see app/lua's client_errors)."""
        for client in (room.redis, room.watch):
            if isinstance(client, redis.asyncio.cluster.RedisCluster):
                with suppress(redis.RedisError):  # not reachable yet: the slots wait it out
                    await client.initialize()

    async def _stop_when(self, stop: threading.Event, room: Room) -> None:
        while not stop.is_set():
            await asyncio.sleep(STOP_POLL_S)
        room.stopping.set()
        room.http.stop_waiting()  # parked deliveries are held back now, not sent later
        await room.doorbell.close()

    async def _leave(self, room: Room) -> None:
        """Clean exit: nothing is pending, so the slots that ever named themselves in a
        pending index leave it, a few calls per shard however many they are."""
        holders = sorted(room.indexed)
        try:
            await room.scrub(self.worker_id, holders, forget=True)
        except redis.RedisError as exc:
            log.warning("%s: could not leave the pending index: %s", self.worker_id, exc)
        with suppress(Exception):
            await origin_limits.leave(room.redis, self.keys, self.worker_id)
        if "delivery" in vars(room):  # made (a cached property) once a slot delivered
            room.delivery.close()
            with suppress(Exception):
                await room.delivery.destinations.close()
        with suppress(Exception):
            await room.scripts.close()
        with suppress(Exception):
            await room.http.close()
        for client in (room.redis, room.watch):
            with suppress(Exception):
                await client.aclose()
