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

import redis

from spec.integration.bus import Bus
from spec.integration.faults import OwnRedis
from spec.integration.processes import children_of, running, wait_until, web_ready


@dataclass
class Cast:
    """Redis, the `busbar web`s (one per port) and the workers, each started again after
    its fault. The cluster soak's cast (bench.soak_cluster) has nodes instead of `redis`."""

    bus: Bus
    ports: list[int]
    scrub_after_s: float
    redis: OwnRedis | None = None
    webs: list[subprocess.Popen] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what must never happen, seen
    _logs: count = field(default_factory=count)

    def start_web(self, i: int) -> None:
        """Web number `i` (on ports[i]), started or started again."""
        log = self.bus.log_dir / f"web{next(self._logs)}.log"
        env = {**self.bus.env, "PORT": str(self.ports[i])}
        web = self.bus.stack.enter_context(running(["web"], env, log=log))
        self.webs[i:i + 1] = [web]  # fmt: skip
        wait_until(lambda: web_ready(log, self.ports[i]), 60, "busbar web to answer")

    def start_worker(self, instead_of: subprocess.Popen | None = None) -> None:  # noqa: ARG002
        """A worker, in place of one that stopped (where it ran, for the cluster soak)."""
        self.bus.start_worker()

    def alive_workers(self) -> list[subprocess.Popen]:
        return [w for w in self.bus.workers if w.poll() is None]

    def redis_answers(self) -> None:
        """Until PING answers: a restarted server refuses, then says it is loading its
        data (BusyLoadingError, longer the more the soak has queued) before it does."""

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.exceptions.ConnectionError:  # BusyLoadingError is one
                return False

        with self.bus.redis() as client:
            wait_until(answers, 60, "Redis to answer again")


def worker_kill9(cast: Cast, rng: random.Random) -> str:
    """A worker dies mid-delivery: its jobs are scrubbed back to the queue."""
    victim = rng.choice(cast.alive_workers())
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    cast.start_worker(victim)
    return f"worker {victim.pid}"


def worker_sigterm(cast: Cast, rng: random.Random) -> str:
    """A deploy: the worker finishes what it holds and exits 0."""
    victim = rng.choice(cast.alive_workers())
    victim.send_signal(signal.SIGTERM)
    code = victim.wait(90)
    if code != 0:
        cast.problems.append(f"worker {victim.pid} exited {code} after SIGTERM")
    cast.start_worker(victim)
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
    assert cast.redis is not None
    down = rng.uniform(0.5, 3)
    stop()
    time.sleep(down)
    cast.redis.start()
    cast.redis_answers()
    return f"down {down:.1f} s"


def redis_kill9(cast: Cast, rng: random.Random) -> str:
    """Redis crashes: only its AOF (appendfsync always) survives."""
    assert cast.redis is not None
    return redis_down(cast, rng, cast.redis.crash)


def redis_sigterm(cast: Cast, rng: random.Random) -> str:
    """A planned Redis restart."""
    assert cast.redis is not None
    return redis_down(cast, rng, cast.redis.stop)


def web_kill9(cast: Cast, rng: random.Random) -> str:
    """`busbar web` dies with publishes in flight (those are never answered 204): one of
    gunicorn's workers, which its arbiter replaces, or all of web, started again."""
    i = rng.randrange(len(cast.webs))
    web = cast.webs[i]
    children = sorted(children_of(web.pid))
    if children and rng.random() < 0.5:
        victim = rng.choice(children)
        os.kill(victim, signal.SIGKILL)
        return f"one worker of web {i}, {victim}"
    os.killpg(web.pid, signal.SIGKILL)
    web.wait()
    cast.start_web(i)
    return f"all of web {i}, restarted"


Fault = Callable[[Cast, random.Random], str]
PROCESS_FAULTS: dict[str, Fault] = {
    "kill -9 a worker": worker_kill9,
    "SIGTERM a worker": worker_sigterm,
    "SIGSTOP a worker": worker_sigstop,
    "kill -9 web": web_kill9,
}
FAULTS: dict[str, Fault] = {  # in this order, so that a seed deals what it always dealt
    "kill -9 a worker": worker_kill9,
    "SIGTERM a worker": worker_sigterm,
    "SIGSTOP a worker": worker_sigstop,
    "kill -9 Redis": redis_kill9,
    "SIGTERM Redis": redis_sigterm,
    "kill -9 web": web_kill9,
}
