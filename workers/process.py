"""`busbar worker`: the process that runs the thread group and stops it cleanly.

The group: the heartbeat, the delivery engine (one event loop carrying every delivery
slot, app/delivery/engine.py), the aux (maintenance) runner, the scheduler and the
tickers. Threads run until a stop is requested (SIGTERM/SIGINT) or one of them dies. A thread
that dies unexpectedly stops the whole process with a non-zero status, so the process
manager restarts it instead of leaving a worker limping with fewer threads than asked.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable
from types import FrameType

import redis

from app.delivery.engine import Engine
from app.limits import open_files_for
from app.lua import Scripts
from app.models.callback_policy import Policy
from app.models.keys import keys_for
from app.models.meta import check_store
from app.models.queue import AUX
from app.redis_client import connect
from app.services.refused_callbacks import name_refused
from app.tracing import from_env
from app.unblock import blocking_name, unblock
from config.errors import ConfigError
from config.settings import Settings
from workers.heartbeat import Heartbeat
from workers.runner import JobRunner
from workers.scheduler import schedulers, tickers

log = logging.getLogger(__name__)

Loop = Callable[[threading.Event], None]
SCRUB_MARGIN = 1.25  # BUSBAR_SCRUB_AFTER_MS >= this x the longest delivery
# a stop ends the takes still blocked this often, this many times (the engine's slots see
# the stop within its STOP_POLL_S, 50 ms)
UNBLOCK_EVERY_S, UNBLOCK_ROUNDS = 0.05, 10


def new_worker_id() -> str:
    return f"{socket.gethostname()}.{os.getpid()}.{secrets.token_hex(3)}".replace("/", "_")


class ThreadGroup:
    """Named loops that share one stop event; the first failure stops them all."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.failed: list[str] = []
        self._threads: list[threading.Thread] = []

    def add(self, name: str, loop: Loop, stop: threading.Event | None = None) -> None:
        """`stop` is the loop's own stop event when it must outlive the others."""
        until = stop or self.stop

        def run() -> None:
            try:
                loop(until)
            except BaseException:
                log.exception("thread %s died", name)
                self.failed.append(name)
                self.stop.set()
                return
            if not until.is_set():
                log.error("thread %s returned before shutdown", name)
                self.failed.append(name)
                self.stop.set()

        self._threads.append(threading.Thread(target=run, name=name, daemon=True))

    def names(self) -> set[str]:
        return {thread.name for thread in self._threads}

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def alive(self, names: set[str]) -> bool:
        return any(t.is_alive() for t in self._threads if t.name in names)

    def join(self, timeout: float, names: set[str] | None = None) -> None:
        """Wait for the threads (those named, if given), `timeout` seconds in all."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if names is None or thread.name in names:
                thread.join(max(0.0, deadline - time.monotonic()))


def check_timing(settings: Settings) -> None:
    """A worker silent for BUSBAR_SCRUB_AFTER_MS is taken for dead and its jobs go to
    others. That silence must outlast any delivery the worker may still have in flight
    when it is cut off from Redis (connect plus answer, with a heartbeat interval to
    spare), or two deliveries to one subscriber would overlap after every partition."""
    delivery_ms = (settings.connect_timeout + settings.timeout) * 1000
    needed = int(delivery_ms * SCRUB_MARGIN)
    if settings.scrub_after_ms < needed:
        raise ConfigError(
            f"BUSBAR_SCRUB_AFTER_MS ({settings.scrub_after_ms} ms) must be at least "
            f"{SCRUB_MARGIN} x (BUSBAR_CONNECT_TIMEOUT + BUSBAR_TIMEOUT) = {needed} ms, so a "
            "worker cut off from Redis has finished its delivery before another takes over; "
            "raise BUSBAR_SCRUB_AFTER_MS or lower BUSBAR_TIMEOUT"
        )


class WorkerProcess:
    """Heartbeat, the delivery engine (its slots start their sweeps at a shard drawn per
    process, so processes spread), the aux thread, the scheduler and the tickers."""

    def __init__(self, settings: Settings, client: redis.Redis | None = None) -> None:
        check_timing(settings)
        self.settings = settings
        self.redis = client or connect(settings)
        self.keys = keys_for(settings)
        try:
            check_store(self.redis, self.keys)
        except redis.RedisError as exc:  # not reachable yet: the threads wait it out
            log.warning("could not check the store's layout and shards against Redis: %s", exc)
        self.worker_id = new_worker_id()
        self.group = ThreadGroup()
        self.signalled: int | None = None
        self.first_home = secrets.randbelow(self.keys.shards)
        # as many deliveries as slots may be parked at a busy origin, and send when it has
        # room (app/delivery/parking.py): up to twice the slots' sockets
        open_files_for(settings.delivery_concurrency, each=2)
        every = max(0.5, settings.scrub_after_ms / 1000 / 10)
        self.heartbeat = Heartbeat(
            self.redis, self.keys, Scripts(self.redis), self.worker_id, every
        )
        # the heartbeat outlives the delivery threads: it stops once they have settled
        self.heartbeat_stop = threading.Event()
        self.group.add("heartbeat", self.heartbeat.run, self.heartbeat_stop)
        self.tracing = from_env("busbar-worker")  # OTEL_EXPORTER_OTLP_ENDPOINT: spans
        self.engine = Engine(settings, self.worker_id, self.first_home, self.tracing)
        self.group.add("delivery", self.engine.run)
        aux = JobRunner(settings, AUX, f"{self.worker_id}/aux")
        self.group.add("aux", aux.run)
        found = schedulers(settings, self.worker_id)
        for n, scheduler in enumerate(found):
            self.group.add("scheduler" if len(found) == 1 else f"scheduler.{n}", scheduler.run)
        for name, ticker in tickers(settings).items():
            self.group.add(f"ticker.{name}", ticker.run)

    def _settle(self, timeout: float, names: set[str]) -> None:
        """Wait for the named threads, ending their blocked takes meanwhile
        (app/unblock.py): a few rounds UNBLOCK_EVERY_S apart, as a slot that had not yet
        seen the stop may block once more; then its deliveries in flight are waited for."""
        deadline = time.monotonic() + timeout
        name = blocking_name(self.worker_id)
        for _ in range(UNBLOCK_ROUNDS):
            if not self.group.alive(names):
                return
            try:
                unblock(self.redis, name)
            except redis.RedisError as exc:  # an ACL refusing CLIENT: waited out instead
                log.info("worker %s: blocked takes waited out: %s", self.worker_id, exc)
                break
            self.group.join(UNBLOCK_EVERY_S, names)
        self.group.join(max(0.0, deadline - time.monotonic()), names)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        """Only records the signal. The handler runs in the main thread between two
        bytecodes, maybe while that thread holds the stop Event's lock (inside its own
        wait, or inside this handler's set() when a second signal comes): setting the
        Event here deadlocked the worker when SIGINT and SIGTERM came 1 ms apart."""
        self.signalled = signum

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        try:
            self.heartbeat.beat()  # before any thread holds a job, so none looks dead
        except redis.RedisError as exc:
            log.warning("first heartbeat failed: %s", exc)
        with contextlib.suppress(redis.RedisError):  # unreachable: the threads wait it out
            name_refused(self.redis, self.keys, Policy.of(self.settings))
        log.info(
            "worker %s started with %d delivery slots",
            self.worker_id,
            self.settings.delivery_concurrency,
        )
        self.group.start()
        while self.signalled is None and not self.group.stop.wait(0.1):
            pass
        if self.signalled is not None:
            log.info("received %s: finishing in-flight work", signal.Signals(self.signalled).name)
            self.group.stop.set()
        settle_s = self.settings.timeout + self.settings.connect_timeout + 5
        self._settle(settle_s, self.group.names() - {"heartbeat"})
        self.heartbeat_stop.set()
        self.group.join(5, names={"heartbeat"})
        self.tracing.shutdown()  # the spans still buffered are exported
        if self.group.failed:
            log.error("worker %s stopping: thread(s) died: %s", self.worker_id, self.group.failed)
            return 1
        self.heartbeat.forget()
        log.info("worker %s stopped", self.worker_id)
        return 0
