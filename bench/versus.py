"""This tree's worker against a baseline commit's (by default the thread engine it
replaced), in one run: bench.delivery
and bench.cluster start one worker, then the other, on the same Redis and web, against
the same load, the order turning round each round, so whatever else the two shared
cores are doing hits both. A ratio is taken round by round (each pair ran minutes
apart at most), then its median.

The two engines read different settings: the thread engine (commit engines.BASELINE, a
worktree under var/ made by bench.serial's checkout) reads BUSBAR_WORKER_THREADS, this
tree reads BUSBAR_DELIVERY_CONCURRENCY and only warns about the other, so each worker is
started with its own variable and never the other's.
"""

from __future__ import annotations

import contextlib
import statistics
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from redis.cluster import RedisCluster

from bench import common, engines
from bench.serial import checkout
from config.settings import Settings

THREADS = "BUSBAR_WORKER_THREADS"  # the baseline's setting
SLOTS = "BUSBAR_DELIVERY_CONCURRENCY"  # this tree's
BASELINE_THREADS = 96  # the baseline's default (its config/settings.py)
T = TypeVar("T")


@dataclass(frozen=True)
class Contender:
    """A worker to measure: where its code is, and the settings it is started with."""

    label: str
    code: Path | None  # None: this tree
    env: dict[str, str] = field(default_factory=dict)

    @property
    def baseline(self) -> bool:
        return self.code is not None

    @property
    def threads(self) -> bool:
        """Whether it is the thread engine (which reads BUSBAR_WORKER_THREADS)."""
        return engines.thread_engine(self.code)

    @property
    def concurrency(self) -> str:
        """What it carries at once, for the reports: threads or slots, and whether that
        is the product's default or set for the comparison."""
        name, unit, default = (
            (THREADS, "threads", BASELINE_THREADS)
            if self.threads
            else (SLOTS, "slots", Settings().delivery_concurrency)
        )
        n = int(self.env.get(name, default))
        return f"{n:,} {unit} ({f'{name}={n}' if name in self.env else 'default'})"


def defaults(rev: str = engines.BASELINE) -> tuple[Contender, Contender]:
    """(baseline, this tree), each with the product's default concurrency (the thread
    engine's 96 threads against 5,000 slots): what an operator who changes nothing gets."""
    code = checkout(rev)
    engine = "thread engine" if engines.thread_engine(code) else "asyncio engine"
    return Contender(f"baseline {rev} ({engine})", code), Contender(engines.tree(), None)


def equal(n: int, rev: str = engines.BASELINE) -> tuple[Contender, Contender]:
    """(baseline, this tree) both carrying `n` deliveries at once: the engines' own cost,
    with the difference in how many deliveries each keeps in flight taken out."""
    return (
        Contender(f"baseline {rev} (thread engine), equal", checkout(rev), {THREADS: str(n)}),
        Contender(f"{engines.tree()}, equal", None, {SLOTS: str(n)}),
    )


def in_turn(items: Sequence[T], round_: int) -> list[T]:
    """The order for a round: as given in even rounds, reversed in odd ones, so neither
    side always runs first (straight after set-up) or last."""
    return list(items) if round_ % 2 == 0 else list(reversed(items))


@contextmanager
def worker(the_bus: common.Bus, who: Contender) -> Iterator[subprocess.Popen]:
    """common.worker for `who`: the bus's settings without either concurrency variable,
    plus its own; the bus's settings are put back once it has stopped."""
    saved = the_bus.env
    the_bus.env = {k: v for k, v in saved.items() if k not in (THREADS, SLOTS)} | who.env
    try:
        with common.worker(the_bus, who.code) as process:
            yield process
    finally:
        the_bus.env = saved


def ratio(ours: Sequence[float], base: Sequence[float]) -> str:
    """Round-by-round ratios ours/baseline as median (min-max)."""
    pairs = [o / b for o, b in zip(ours, base, strict=True) if b]
    return common.spread(pairs, "{:.2f}")


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def calls(client: object) -> dict[str, int]:
    """INFO commandstats calls per command, summed over every primary of a cluster: a
    worker's round trips are EVALSHA and BLMOVE (commands a script runs count too, so
    the rest say what the scripts did, not what was sent)."""
    if isinstance(client, RedisCluster):
        stats = list(client.info("commandstats", target_nodes=RedisCluster.PRIMARIES).values())
    else:
        stats = [client.info("commandstats")]  # type: ignore[attr-defined]
    found: dict[str, int] = {}
    for one in stats:
        for name, value in one.items():
            if name.startswith("cmdstat_"):
                found[name[8:]] = found.get(name[8:], 0) + int(value.get("calls", 0))
    return found


def calls_since(the_bus: common.Bus, before: dict[str, int]) -> dict[str, int]:
    with contextlib.closing(the_bus.redis()) as client:
        now = calls(client)
    return {k: v - before.get(k, 0) for k, v in now.items() if v - before.get(k, 0)}


def calls_now(the_bus: common.Bus) -> dict[str, int]:
    with contextlib.closing(the_bus.redis()) as client:
        return calls(client)
