"""The processes a soak runs and the faults it deals them (bench.soak).

Faults come one at a time, each finished (the process back, the pause over) before the
next: what is measured is whether the bus loses anything across them, not how it
fares with two at once, which the fault tests in spec/integration/ look at one by one.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count

from spec.integration.bus import Bus
from spec.integration.faults import OwnRedis
from spec.integration.processes import children_of, running, wait_until, web_ready


@dataclass
class Cast:
    """Redis, one `busbar web` and the workers, each started again after its fault."""

    redis: OwnRedis
    bus: Bus
    port: int
    scrub_after_s: float
    web: subprocess.Popen | None = None
    problems: list[str] = field(default_factory=list)  # what must never happen, seen
    _webs: count = field(default_factory=count)

    def start_web(self) -> None:
        log = self.bus.log_dir / f"web{next(self._webs)}.log"
        self.web = self.bus.stack.enter_context(running(["web"], self.bus.env, log=log))
        wait_until(lambda: web_ready(log, self.port), 60, "busbar web to answer")

    def alive_workers(self) -> list[subprocess.Popen]:
        return [w for w in self.bus.workers if w.poll() is None]

    def redis_answers(self) -> None:
        with self.bus.redis() as client:
            wait_until(lambda: bool(client.ping()), 60, "Redis to answer again")


def worker_kill9(cast: Cast, rng: random.Random) -> str:
    """A worker dies mid-delivery: its jobs are scrubbed back to the queue."""
    victim = rng.choice(cast.alive_workers())
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    cast.bus.start_worker()
    return f"worker {victim.pid}"


def worker_sigterm(cast: Cast, rng: random.Random) -> str:
    """A deploy: the worker finishes what it holds and exits 0."""
    victim = rng.choice(cast.alive_workers())
    victim.send_signal(signal.SIGTERM)
    code = victim.wait(90)
    if code != 0:
        cast.problems.append(f"worker {victim.pid} exited {code} after SIGTERM")
    cast.bus.start_worker()
    return f"worker {victim.pid}"


def worker_sigstop(cast: Cast, rng: random.Random) -> str:
    """A worker frozen past the scrub window (a GC pause, a stalled VM): its jobs go to
    the others, and when it wakes it must change nothing it no longer holds."""
    victim = rng.choice(cast.alive_workers())
    frozen = cast.scrub_after_s + rng.uniform(1, 3)
    os.kill(victim.pid, signal.SIGSTOP)
    time.sleep(frozen)
    os.kill(victim.pid, signal.SIGCONT)
    return f"worker {victim.pid}, {frozen:.1f} s"


def redis_down(cast: Cast, rng: random.Random, stop: Callable[[], None]) -> str:
    """Redis stopped by `stop`, down a while, started again on its data."""
    down = rng.uniform(0.5, 3)
    stop()
    time.sleep(down)
    cast.redis.start()
    cast.redis_answers()
    return f"down {down:.1f} s"


def redis_kill9(cast: Cast, rng: random.Random) -> str:
    """Redis crashes: only its AOF (appendfsync always) survives."""
    return redis_down(cast, rng, cast.redis.crash)


def redis_sigterm(cast: Cast, rng: random.Random) -> str:
    """A planned Redis restart."""
    return redis_down(cast, rng, cast.redis.stop)


def web_kill9(cast: Cast, rng: random.Random) -> str:
    """`busbar web` dies with publishes in flight (those are never answered 204): one of
    gunicorn's workers, which its arbiter replaces, or all of web, started again."""
    assert cast.web is not None
    children = sorted(children_of(cast.web.pid))
    if children and rng.random() < 0.5:
        victim = rng.choice(children)
        os.kill(victim, signal.SIGKILL)
        return f"one web worker, {victim}"
    os.killpg(cast.web.pid, signal.SIGKILL)
    cast.web.wait()
    cast.start_web()
    return "all of web, restarted"


FAULTS: dict[str, Callable[[Cast, random.Random], str]] = {
    "kill -9 a worker": worker_kill9,
    "SIGTERM a worker": worker_sigterm,
    "SIGSTOP a worker": worker_sigstop,
    "kill -9 Redis": redis_kill9,
    "SIGTERM Redis": redis_sigterm,
    "kill -9 web": web_kill9,
}
