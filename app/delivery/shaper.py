"""The processes that run a worker's transforms (app/delivery/shaping.py's shape_batch),
and the slow lane for subscriptions whose transforms hit a bound (Shaper)."""

from __future__ import annotations

import asyncio
import ctypes
import logging
import math
import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from app import codec
from app.delivery.cpu_budget import CpuBudget
from app.delivery.flight import Flight
from app.delivery.shaping import FAILED, REMEMBERED, Made, Shaped, shape_batch
from app.errors import SlowLaneSpent
from app.models.transform import Bounds

log = logging.getLogger(__name__)
PROCESSES = 2  # transforms of this many batches run at once, per engine
# the bounds whose failure sends a subscription's transforms to the slow lane: what a
# runaway or hostile expression hits (an expression error fails at once, and stays)
BOUNDS_HIT = frozenset(f"{FAILED} {bound}" for bound in ("time", "depth", "size"))
PR_SET_PDEATHSIG = 1  # prctl(2)
POOL_NICE = 0  # the pool's niceness over the worker's: ordinary transforms, the bus's work
LANE_NICE = 10  # the slow lane's: what hit a bound yields the CPU to everything else
SLOW_FOR_S = 60.0  # a table that hit a bound stays in the slow lane this long after
SLOW_MS = 20  # BUSBAR_TRANSFORM_SLOW_MS: the lane's CPU milliseconds a second


def pool_process(nice: int) -> None:
    """Each pool process's initializer. Killed when the worker that started it dies,
    whatever killed it (kill -9 included: nothing of the worker is left to stop it).
    The slow lane's is niced: where cores are few, a transform running to its bound
    yields the CPU to the deliveries, the web and Redis (its bound counts its own CPU
    time, so it loses nothing but time for it). The pool's is not: it runs ordinary
    transforms, part of delivering a healthy subscriber's events, and a subscription
    whose expression hits a bound there once is in the lane for its next batches.
    Measured (bench.transforms_delivery, same-run ratios): 10 transforming subscribers
    delivered at 0.53x of 10 plain ones, against 0.46x with the pool niced, and
    publishes were not slowed (docs/transforms.md, Priorities)."""
    if nice:
        os.nice(nice)
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:  # not Linux: the pool's own shutdown stops them on a clean exit
        pass
    if os.getppid() == 1:  # the worker died before the line above ran
        os._exit(0)


class Shaper:
    """One per engine: the processes that run transforms (PROCESSES, started at the
    first batch that needs one). Not threads of the worker: a thread evaluating a
    transform holds the interpreter for up to 5 ms at a time, and a transform that runs
    to its time bound made every other delivery of the worker wait so (p99 of a healthy
    subscriber 4.4 ms alone, 35.6 ms beside one, bench.transforms_delivery). In a
    process of its own it takes a core's share, and the worker's loop goes on.

    The slow lane: a subscription whose transforms hit a bound (time, depth or size,
    BOUNDS_HIT; not an expression error, which fails at once) has its batches shaped in
    a process of their own, until SLOW_FOR_S pass without that happening again (started
    when first needed). In the pool, each of its batches held a process for up to its
    bound an event (a recursion stopped at its depth took 13-17 ms), and every other
    subscription's batches waited behind it; in the lane they wait only behind the other
    slow ones, within the lane's share. Niced (LANE_NICE), the pool not (POOL_NICE:
    pool_process says why). By content: a new version of the transforms starts in the
    pool again.

    The lane's share of a core (app/delivery/cpu_budget.py, `slow_ms` a second): its
    batches are shaped one at a time, each given at most what is left of the share in
    CPU time (its events not reached stay queued, as past the batch's time); a batch
    that finds the share spent is not shaped but held back (SlowLaneSpent) until it is
    back."""

    def __init__(
        self,
        bounds: Bounds,
        batch_s: float = 0.5,
        processes: int = PROCESSES,
        slow_for_s: float = SLOW_FOR_S,
        slow_ms: int = SLOW_MS,
    ) -> None:
        self._bounds = bounds
        # filled up to one evaluation run to its time bound: a time-out at a time
        self._budget = CpuBudget(slow_ms / 1000, bounds.time_ms / 1000)
        self._turn: asyncio.Lock | None = None  # the lane's batches, one at a time
        self._batch_s = batch_s
        self._processes = processes
        self._slow_for_s = slow_for_s
        self._pool: ProcessPoolExecutor | None = None
        self._slow_pool: ProcessPoolExecutor | None = None
        self._slow: dict[bytes, float] = {}  # a table's content: until (time.monotonic())

    def slow(self, transforms: bytes) -> bool:
        """Whether a subscription's transforms are in the slow lane now."""
        until = self._slow.get(transforms)
        if until is None:
            return False
        if until > time.monotonic():
            return True
        del self._slow[transforms]
        return False

    def _lane(self, transforms: bytes) -> ProcessPoolExecutor:
        if self.slow(transforms):
            if self._slow_pool is None:
                self._slow_pool = _started(1, LANE_NICE)
            return self._slow_pool
        if self._pool is None:
            self._pool = _started(self._processes, POOL_NICE)
        return self._pool

    def _ran(self, flight: Flight, made: Made) -> None:
        transforms = flight.transforms
        hit = next((status for _, status in made.failed if status in BOUNDS_HIT), None)
        if hit is not None:
            if not self.slow(transforms):
                log.warning("transforms of %s failed on a bound (%s): shaped in the slow "
                            "lane, within its share of a core, for %.0f s", flight.client,
                            hit.removeprefix(f"{FAILED} "), self._slow_for_s)  # fmt: skip
            self._slow.pop(transforms, None)  # the newest last: the oldest go first
            self._slow[transforms] = time.monotonic() + self._slow_for_s
            if len(self._slow) > REMEMBERED:
                del self._slow[next(iter(self._slow))]

    async def shape(self, flight: Flight) -> Shaped:
        """Every event of `flight` through its route's transform, in a process of the
        pool (or of the slow lane, within its share: else SlowLaneSpent); the loop goes
        on meanwhile."""
        if not self.slow(flight.transforms):
            return self._read(flight, await self._run(flight))
        if self._turn is None:
            self._turn = asyncio.Lock()
        async with self._turn:
            wait_ms = self._budget.wait_ms()
            if wait_ms:
                raise SlowLaneSpent("the slow lane has spent its share of a core", wait_ms)
            made = await self._run(flight, self._budget.left_s())
            self._budget.spend(made.cpu_s)
        return self._read(flight, made)

    async def _run(self, flight: Flight, cpu_s: float = math.inf) -> Made:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._lane(flight.transforms), shape_batch, flight.transforms, flight.lane,
            flight.entries, self._bounds, self._batch_s, cpu_s,
        )  # fmt: skip

    def _read(self, flight: Flight, made: Made) -> Shaped:
        self._ran(flight, made)
        return Shaped(
            [codec.unpack_entry(e) for e in made.sent], made.entries, made.sent, made.dropped,
            made.failed, made.deferred,
        )  # fmt: skip

    def close(self) -> None:
        for pool in (self._pool, self._slow_pool):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._slow_pool = None


def _started(processes: int, nice: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        processes, mp_context=get_context("spawn"), initializer=pool_process, initargs=(nice,)
    )
