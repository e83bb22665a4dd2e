"""The worker half of `make bench-check`: bench.serial, bench.fanout and bench.keys, short,
each with a baseline's worker and this tree's taking turns on one web and Redis.

A worker is what those benchmarks measure, so, as their own `--baseline` does, the
baseline's worker runs from its checkout (bench.serial's worktree under var/) against
this tree's `busbar web` and Redis, and this tree's own load drives both: the same
events, subscribers and sink, the order of the two workers turning round each round.
Each part returns, per figure, whether higher is better and each worker's rounds.

- serial: a 2,000-event backlog for one `max: 1, timeout: 0` subscriber, drained;
  events/s and worker CPU per event (bench.serial's drain).
- fanout: one event to 200 subscribers answering in 50 ms (bench.fanout's scenario A,
  smaller); p99 ms to the last and worker CPU per delivery.
- keys: bench.keys's `concurrency 64` case, 1,000 events over 400 urls, events/s; a
  baseline from before ordering keys (no app/models/partitions.py) has no such thing,
  so there the case both have, `concurrency 1` on 100 events, is what is compared.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import common, engines, fanout, keys, serial
from bench.asyncsink import AsyncSink
from bench.sink import Sink

Figures = dict[str, tuple[bool, dict[str, list[float]]]]  # name: (higher better, rounds)
Variants = dict[str, Path | None]
FANOUT = 200  # subscribers
SERIAL = 2_000  # events


def turns(variants: Variants, rounds: int, one: Callable[[str, Path | None], dict]) -> dict:
    """`one(label, code)` for each worker, `rounds` times, the order turning round."""
    found: dict[str, list[dict]] = {label: [] for label in variants}
    for r in range(rounds):
        for label, code in list(variants.items())[:: 1 if r % 2 == 0 else -1]:
            common.wait_quiet()
            found[label].append(one(label, code))
            print(f"{label} round {r}: {found[label][-1]}", flush=True)
    return found


def pick(found: dict[str, list[dict]], field: str, higher: bool) -> tuple[bool, dict]:
    return higher, {label: [r[field] for r in rows] for label, rows in found.items()}


def check_serial(variants: Variants, rounds: int) -> Figures:
    sink = Sink()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="bench-check-") as work,
            common.web_bus(Path(work), env=serial.ENV) as the_bus,
        ):
            serial.subscribe(the_bus, sink)
            found = turns(variants, rounds, lambda _l, c: serial.drain(the_bus, sink, SERIAL, c))
    finally:
        sink.stop()
    return {
        "serial events/s": pick(found, "rate", True),
        "serial worker CPU µs/event": pick(found, "worker_us", False),
    }


def check_fanout(variants: Variants, rounds: int) -> Figures:
    sink = AsyncSink([("/A/", 0.05)])
    try:
        with (
            tempfile.TemporaryDirectory(prefix="bench-check-") as work,
            common.web_bus(Path(work), env=fanout.ENV) as the_bus,
        ):
            the_bus.client("pub").close()
            url = f"http://127.0.0.1:{sink.port}"
            engines.subscribe_many(the_bus, [
                (f"a{i}", {"topics": ["fan_a"], "timeout": 0, "callback": f"{url}/A/{i}"})
                for i in range(FANOUT)
            ])  # fmt: skip

            def one(_label: str, code: Path | None) -> dict[str, Any]:
                with engines.worker(the_bus, code) as process:
                    rss = engines.PeakRss(process.pid)
                    time.sleep(1)  # settled in
                    fanout.one_round(the_bus, sink, "fan_a", FANOUT, rss)  # its connections
                    got = fanout.one_round(the_bus, sink, "fan_a", FANOUT, rss)
                    rss.stop()
                return {k: v for k, v in got.items() if k != "samples"}

            found = turns(variants, rounds, one)
    finally:
        sink.stop()
    return {
        "fanout p99 ms": pick(found, "p99", False),
        "fanout worker CPU ms/delivery": pick(found, "worker_cpu_ms", False),
    }


def check_keys(variants: Variants, rounds: int) -> Figures:
    bases = [code for code in variants.values() if code is not None]
    keyed = all((code / "app" / "models" / "partitions.py").exists() for code in bases)
    case = keys.CASES[1]._replace(events=1000) if keyed else keys.CASES[0]._replace(events=100)
    origin, port, control = common.server_process(keys.serve)
    n = 0
    try:
        with (
            tempfile.TemporaryDirectory(prefix="bench-check-") as work,
            common.web_bus(Path(work)) as the_bus,
        ):
            the_bus.client("pub").close()

            def one(_label: str, code: Path | None) -> dict[str, Any]:
                nonlocal n
                n += 1
                with common.worker(the_bus, code):
                    return keys.one_round(the_bus, control, port, case, n)

            found = turns(variants, rounds, one)
    finally:
        with contextlib.suppress(OSError):
            control.send("stop")
        origin.terminate()
    faults = ("key overlaps", "urls out of order", "missing or repeated")
    broken = [r for rows in found.values() for r in rows if any(r[f] for f in faults)]
    if broken:
        raise RuntimeError(f"bench.keys's {case.label}: keys broken: {broken[0]}")
    return {f"keys {case.label} events/s": pick(found, "events/s", True)}
