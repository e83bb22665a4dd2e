"""`busbar worker`: the process that runs the thread group and stops it cleanly.

Threads run until a stop is requested (SIGTERM/SIGINT) or one of them dies. A thread
that dies unexpectedly stops the whole process with a non-zero status, so the process
manager restarts it instead of leaving a worker limping with fewer threads than asked.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import threading
from collections.abc import Callable
from types import FrameType

import redis

from app.models.keys import Keys
from app.models.queue import AUX, MAIN
from app.redis_client import connect
from config.settings import Settings
from workers.heartbeat import Heartbeat
from workers.runner import JobRunner
from workers.scheduler import Scheduler, tickers

log = logging.getLogger(__name__)

Loop = Callable[[threading.Event], None]


def new_worker_id() -> str:
    return f"{socket.gethostname()}.{os.getpid()}.{secrets.token_hex(3)}".replace("/", "_")


class ThreadGroup:
    """Named loops that share one stop event; the first failure stops them all."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.failed: list[str] = []
        self._threads: list[threading.Thread] = []

    def add(self, name: str, loop: Loop) -> None:
        def run() -> None:
            try:
                loop(self.stop)
            except BaseException:
                log.exception("thread %s died", name)
                self.failed.append(name)
                self.stop.set()
                return
            if not self.stop.is_set():
                log.error("thread %s returned before shutdown", name)
                self.failed.append(name)
                self.stop.set()

        self._threads.append(threading.Thread(target=run, name=name, daemon=True))

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def join(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(timeout)


class WorkerProcess:
    def __init__(self, settings: Settings, client: redis.Redis | None = None) -> None:
        self.settings = settings
        self.redis = client or connect(settings)
        self.keys = Keys(settings.key_prefix)
        self.worker_id = new_worker_id()
        self.group = ThreadGroup()
        every = max(0.5, settings.scrub_after_ms / 1000 / 10)
        self.heartbeat = Heartbeat(self.redis, self.keys, self.worker_id, every)
        self.group.add("heartbeat", self.heartbeat.run)
        for i in range(settings.worker_threads):
            runner = JobRunner(settings, MAIN, f"{self.worker_id}/{i}")
            self.group.add(f"main.{i}", runner.run)
        self.group.add("aux", JobRunner(settings, AUX, f"{self.worker_id}/aux").run)
        self.group.add("scheduler", Scheduler(settings).run)
        for name, ticker in tickers(settings).items():
            self.group.add(f"ticker.{name}", ticker.run)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: finishing in-flight work", signal.Signals(signum).name)
        self.group.stop.set()

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        try:
            self.heartbeat.beat()  # before any thread holds a job, so none looks dead
        except redis.RedisError as exc:
            log.warning("first heartbeat failed: %s", exc)
        log.info(
            "worker %s started with %d delivery threads",
            self.worker_id,
            self.settings.worker_threads,
        )
        self.group.start()
        while not self.group.stop.wait(0.5):
            pass
        self.group.join(self.settings.timeout + self.settings.connect_timeout + 5)
        if self.group.failed:
            log.error("worker %s stopping: thread(s) died: %s", self.worker_id, self.group.failed)
            return 1
        self.heartbeat.forget()
        log.info("worker %s stopped", self.worker_id)
        return 0
