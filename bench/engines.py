"""Shared by the benchmarks that set the asyncio delivery engine against the thread
engine it replaced (bench.isolation, bench.fanout): the baseline worker's
checkout, many subscribers set up quickly, a worker's peak RSS, and a worker stopped
without waiting out deliveries that will never be answered.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench import common
from bench.serial import checkout
from config.settings import Settings

BASELINE = "01977d5"  # the thread engine: BUSBAR_WORKER_THREADS=96 delivery threads
SETUP_THREADS = 8  # gunicorn's 2 processes x 8 threads, near enough
Subscriber = tuple[str, dict]  # (token, subscription body)


def rss_kib(pid: int) -> int:
    """A process's resident memory now, KiB (0 once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS:")), 0)


def tree() -> str:
    """This tree's label: its commit, and whether the worker's code has changes not yet
    committed (figures measured on work in progress say so)."""
    root = Path(__file__).resolve().parent.parent
    git = ["git", "-C", str(root)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--", "app", "workers", "jobs", "config"],
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    return f"this tree ({head.stdout.strip()}{', uncommitted changes' if dirty else ''})"


def thread_engine(code: Path | None) -> bool:
    """Whether a checkout is the thread engine (it has no BUSBAR_DELIVERY_CONCURRENCY):
    a baseline is any commit, and the two engines read different settings."""
    if code is None:
        return False
    return "delivery_concurrency" not in (code / "config" / "settings.py").read_text()


def variants(rev: str) -> dict[str, Path | None]:
    """Workers to compare, by label: the baseline's checkout, then this tree."""
    code = checkout(rev)
    engine = "threads" if thread_engine(code) else "asyncio"
    return {f"baseline {rev} ({engine})": code, tree(): None}


def concurrency(code: Path | None) -> str:
    """How many deliveries a worker carries at once, with product defaults: the
    baseline's threads, this tree's BUSBAR_DELIVERY_CONCURRENCY (worker threads on a
    tree that has no such setting yet)."""
    if thread_engine(code):
        return "BUSBAR_WORKER_THREADS=96"  # the thread engine's default
    return f"BUSBAR_DELIVERY_CONCURRENCY={Settings().delivery_concurrency}"


def loop_name() -> str:
    """Which event loop bench.asyncsink runs on (uvloop when it is installed)."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def subscribe_many(the_bus: common.Bus, subscribers: list[Subscriber]) -> None:
    """A token and a subscription for each, through the HTTP API on SETUP_THREADS
    keep-alive connections at once: set-up, not measured, and 10,000 of them one after
    another would take minutes (each request names its own token)."""
    todo: queue.SimpleQueue[Subscriber | None] = queue.SimpleQueue()
    for one in subscribers:
        todo.put(one)
    failed: list[str] = []

    def call(conn: http.client.HTTPConnection, token: str, path: str, body: dict) -> None:
        auth = "Basic " + base64.b64encode(f"{token}:".encode()).decode()
        headers = {"Authorization": auth, "Content-Type": "application/json"}
        conn.request("POST", path, json.dumps(body).encode(), headers)
        response = conn.getresponse()
        response.read()
        if response.status >= 300:
            failed.append(f"{path} for {token}: {response.status}")

    def run() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", the_bus.port, timeout=60)
        with contextlib.closing(conn):
            while (one := todo.get()) is not None and not failed:
                token, body = one
                call(conn, the_bus.root, "/api_tokens", {"name": token, "token": token})
                call(conn, token, "/subscription", body)

    pool = [threading.Thread(target=run, daemon=True) for _ in range(SETUP_THREADS)]
    for thread in pool:
        todo.put(None)
        thread.start()
    for thread in pool:
        thread.join()
    if failed:
        raise RuntimeError(f"setting up subscribers: {failed[0]}")


class PeakRss:
    """A process's RSS sampled every 20 ms on a thread: the peak of a fan-out lasts
    only while its deliveries are in flight."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, rss_kib(pid)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(0.02):
            self.peak = max(self.peak, rss_kib(self.pid))

    def reset(self) -> int:
        """Start a new peak from now; returns the RSS now, KiB."""
        self.peak = rss_kib(self.pid)
        return self.peak

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


@contextmanager
def worker(the_bus: common.Bus, code: Path | None) -> Iterator[subprocess.Popen]:
    """bench.common.worker, but killed at the end (SIGKILL, by its process group, which
    is its own): a graceful stop would wait out every delivery to a black hole, up to
    BUSBAR_TIMEOUT, and nothing after the measurement needs the worker's settling."""
    with common.worker(the_bus, code) as process:
        try:
            yield process
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
