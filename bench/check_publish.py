"""bench.publish's loads, side by side: this tree's web against a baseline's, in one run.

Each commit gets its own `busbar web` (its own code, run from its checkout; product
defaults: gevent, 2 processes) on its own valkey with one subscriber, both started
before the first round, so the only difference between them is the code. Each round
runs the same three loads under wrk (`-t2 -c8`) on one, then the other, the order
turning round each round: GET /health (that server's floor), a one-event publish, a
bulk publish of BULK events. Today's load generator drives both, so a change to the
benchmark cannot pass for a change to busbar. Per round: the publish's share of its own
floor (which cancels much of what other jobs take from the machine), the bulk rate, and
the web and Redis CPU per publish request, and the web's alone per publish and per floor
request.

`--pin`: each web's processes on the first core, its Redis and the load generator on
the second (Linux CPU affinity), as where Redis and the clients are other machines: the
floor then measures what the web's own core serves, and a publish pays the web's part
of it only. Without it every process shares both cores, and a publish's Redis work
(about 40 µs) and the load generator's share are taken from the web's.

    .venv/bin/python -m bench.check_publish [--base REV] [--rounds N] [--seconds S] [--pin]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import NamedTuple

from bench import common, publish
from bench.loadgen import Sample
from bench.serial import checkout
from spec.integration.processes import children_of, wait_until

BULK = 100  # events a bulk request: issue 54's figure
WORKERS = 2  # gunicorn processes: the product default


class Side(NamedTuple):
    bus: common.Bus
    roles: dict[str, list[int]]


class Round(NamedTuple):
    """One round of one commit: what the check compares."""

    floor: float  # GET /health, req/s
    single: float  # one-event publish, req/s
    share: float  # single / floor
    bulk: float  # events/s
    cpu_us: float  # web + Redis CPU per one-event publish request, µs
    web_us: float  # the web's alone, µs
    floor_web_us: float  # the web's CPU per GET /health, µs

    @classmethod
    def of(cls, samples: list[Sample]) -> Round:
        floor, one, bulk = samples
        rate = one.request_rate
        cpu = (one.cpu["web"] + one.cpu["redis"]) * 1e6 / rate
        web, floor_web = one.cpu["web"] * 1e6 / rate, floor.cpu["web"] * 1e6 / floor.request_rate
        return cls(
            floor.request_rate, rate, rate / floor.request_rate, bulk.rate, cpu, web, floor_web
        )


@contextmanager
def sides(work: Path, variants: dict[str, Path | None]) -> Iterator[dict[str, Side]]:
    """A web bus per commit, each subscribed, all running at once (idle while the other
    is measured)."""
    with ExitStack() as stack:
        found = {}
        for i, (label, code) in enumerate(variants.items()):
            env = {"BUSBAR_WEB_WORKER_CLASS": "gevent", "BUSBAR_WEB_WORKERS": str(WORKERS)}
            the_bus = stack.enter_context(common.web_bus(work / f"side{i}", env=env, code=code))
            web = the_bus.pids["web"]

            def started(web: int = web) -> bool:
                return len(children_of(web)) >= WORKERS

            wait_until(started, what="gunicorn's workers")
            the_bus.client("pub").close()
            with contextlib.closing(the_bus.client("sub")) as sub:
                sub.ok("POST", "/subscription", publish.SUBSCRIPTION)
            roles = {"web": sorted(children_of(web)), "redis": [the_bus.pids["redis"]]}
            found[label] = Side(the_bus, roles)
        yield found


@contextmanager
def pinned(running: dict[str, Side]) -> Iterator[None]:
    """Every web on the first core; the Redis servers and this process (so the load
    generators it starts) on the second; all back on every core after."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        raise SystemExit("--pin needs 2 cores")
    webs = [p for side in running.values() for p in [side.bus.pids["web"], *side.roles["web"]]]
    rest = [0, *(p for side in running.values() for p in side.roles["redis"])]
    for pid in webs:
        os.sched_setaffinity(pid, cores[:1])
    for pid in rest:
        os.sched_setaffinity(pid, cores[1:2])
    try:
        yield
    finally:
        for pid in [*webs, *rest]:
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(pid, cores)


def measure(
    variants: dict[str, Path | None], rounds: int, seconds: float, pin: bool = False
) -> dict[str, list[Round]]:
    """`rounds` rounds of each commit, alternating, after a warm-up of each; `pin`: see
    pinned()."""
    plan = publish.loads(8, BULK)
    found: dict[str, list[Round]] = {label: [] for label in variants}
    with (
        tempfile.TemporaryDirectory(prefix="bench-check-publish-") as tmp,
        sides(Path(tmp), variants) as running,
        pinned(running) if pin else contextlib.nullcontext(),
    ):
        for side in running.values():  # imports, script cache, connection pools
            for load in plan:
                publish.run_checked(side.bus, "wrk", load, 1.0, side.roles)
        labels = list(running)
        for r in range(rounds):
            common.wait_quiet()
            for label in labels[:: 1 if r % 2 == 0 else -1]:
                side = running[label]
                samples = [
                    publish.run_checked(side.bus, "wrk", load, seconds, side.roles) for load in plan
                ]
                found[label].append(Round.of(samples))
                print(f"publish {label} round {r}: {found[label][-1]}", flush=True)
    return found


def figures(found: dict[str, list[Round]]) -> dict[str, tuple[bool, dict[str, list[float]]]]:
    """The figures bench.check compares: name -> (higher is better, rounds by commit)."""

    def column(field: str) -> dict[str, list[float]]:
        return {label: [getattr(r, field) for r in rows] for label, rows in found.items()}

    return {
        "publish 1 event / its /health floor": (True, column("share")),
        f"bulk publish ({BULK} a request) events/s": (True, column("bulk")),
        "publish web+Redis CPU µs/request": (False, column("cpu_us")),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.check_publish", description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="73a1eb1", help="the commit to set against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--pin", action="store_true", help="web on one core, the rest on another")
    args = parser.parse_args(argv)
    variants = {f"base {args.base}": checkout(args.base), "this tree": None}
    found = measure(variants, args.rounds, args.seconds, args.pin)
    for label, rounds in found.items():
        medians = [statistics.median(column) for column in zip(*rounds, strict=True)]
        print(label, Round(*medians))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
