"""A bus at rest with many subscribers: what a `busbar worker` and Redis spend a second
while nothing is published, this tree's worker against a baseline's, in the same run.

The tickers' jobs (Expire every 10 s, Monitor, Autodrop, the scrubs, the heartbeat)
cost a worker something whether anything is queued or not, and some of that grew with
the number of subscribers: Expire ran a script for each of them every run, and looked
at every one's circuit for the auto-pause, and Monitor's log line (the product's
default sink, `print`, at its default level, kept here) carried every subscriber's
series. This measures that cost beside 10,000 idle
subscribers (and beside 100, for the part that does not grow). Each round starts the
worker on the same web and Redis, waits SETTLE_S, and takes the CPU of the worker and
of Redis over --seconds; the two workers take turns, the order turning round. The
auto-pause's mark (P{c}:auto_pause:looked) is removed before each round, so this
tree's worker looks at the circuits once in every round, as it does once a 5 minutes:
its figure counts a look every round, more than it pays at rest.

    .venv/bin/python -m bench.upkeep                       # against BASELINE
    .venv/bin/python -m bench.upkeep --baseline <rev> --rounds 5
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import common, engines
from bench.serial import checkout

COMMAND = ".venv/bin/python -m bench.upkeep"
BASELINE = "3536fcf"  # before Expire walked only the subscribers with events queued
ENV = {"BUSBAR_LOG_LEVEL": "info", "BUSBAR_MONITOR_SINK": "print"}  # the product's defaults
SETTLE_S = 5.0  # after the worker is ready: its start's own work is not upkeep
ROLES = ("worker", "redis")


def subscribe(the_bus: common.Bus, first: int, count: int) -> None:
    """`count` more subscribers, s<first>.., each to topic `rest`, none with events."""
    engines.subscribe_many(the_bus, [
        (f"s{i}", {"callback": f"http://127.0.0.1:9/{i}", "topics": ["rest"], "max": 1})
        for i in range(first, first + count)
    ])  # fmt: skip


def at_rest(the_bus: common.Bus, code: Path | None, seconds: float) -> dict[str, float]:
    """CPU ms a second of the worker and of Redis over `seconds`, the worker at rest."""
    with contextlib.closing(the_bus.redis()) as client:
        client.delete(the_bus.keys.auto_pause_looked)
    common.wait_quiet()
    with common.worker(the_bus, code):
        time.sleep(SETTLE_S)
        before, started = the_bus.cpu(), time.monotonic()
        time.sleep(seconds)
        after, took = the_bus.cpu(), time.monotonic() - started
    return {role: 1000 * (after[role] - before[role]) / took for role in ROLES}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=BASELINE, help="the commit to set against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0, help="measured, a round")
    parser.add_argument("--subscribers", default="100,10000", help="bus sizes, in order")
    parser.add_argument("--quick", action="store_true", help="1 round of 12 s, 2,000 at most")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.subscribers.split(",")]
    rounds, seconds = (1, 12.0) if args.quick else (args.rounds, args.seconds)
    if args.quick:
        sizes = [min(n, 2_000) for n in sizes]
    ours, base = engines.tree(), f"baseline {args.baseline}"
    variants: dict[str, Path | None] = {base: checkout(args.baseline), ours: None}
    rows: dict[int, dict[str, list[dict[str, float]]]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="busbar-bench-") as work,
        common.web_bus(Path(work), env=ENV) as the_bus,
    ):
        subscribed = 0
        for size in sizes:
            subscribe(the_bus, subscribed, size - subscribed)
            subscribed = size
            found = rows.setdefault(size, {label: [] for label in variants})
            for r in range(rounds):
                for label, code in list(variants.items())[:: 1 if r % 2 == 0 else -1]:
                    found[label].append(at_rest(the_bus, code, seconds))
                    print(f"{size} subscribers, {label}, round {r}: {found[label][-1]}",
                          flush=True)  # fmt: skip
    command = COMMAND + (" --quick" if args.quick else "")
    common.write_report("upkeep", report(command, seconds, rows, ours, base))
    largest = rows[sizes[-1]]
    common.write_headlines("upkeep", [
        (f"worker CPU at rest beside {sizes[-1]:,} subscribers, ms/s",
         common.spread([r["worker"] for r in largest[ours]], "{:.1f}") + f" ({base}: "
         + common.spread([r["worker"] for r in largest[base]], "{:.1f}") + ")"),
        (f"Redis CPU at rest beside {sizes[-1]:,} subscribers, ms/s",
         common.spread([r["redis"] for r in largest[ours]], "{:.1f}") + f" ({base}: "
         + common.spread([r["redis"] for r in largest[base]], "{:.1f}") + ")"),
    ])  # fmt: skip


def report(
    command: str, seconds: float, rows: dict[int, dict[str, list[dict[str, float]]]],
    ours: str, base: str,
) -> str:  # fmt: skip
    lines = [
        "# A bus at rest: the worker's and Redis's upkeep beside many idle subscribers",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        "One `busbar web` and Redis with the product's defaults (Monitor's line logged, "
        "as `BUSBAR_MONITOR_SINK=print` and `BUSBAR_LOG_LEVEL=info` have it), subscribers "
        "with nothing "
        "queued; a `busbar worker` started, left "
        f"{SETTLE_S:.0f} s, then its CPU and Redis's taken over {seconds:.0f} s, nothing "
        f"published. The {base} worker runs from a worktree of its commit; the two take "
        "turns. This tree's worker looks at every circuit for the auto-pause once a round "
        "(at rest: once a 5 minutes). Median (min-max) over the rounds, ms of CPU a second.",
        "",
        "| subscribers | worker | worker CPU, ms/s | Redis CPU, ms/s |",
        "|---|---|---|---|",
    ]
    for size, found in rows.items():
        for label, runs in found.items():
            lines.append(
                f"| {size:,} | {label} | {common.spread([r['worker'] for r in runs], '{:.1f}')} "
                f"| {common.spread([r['redis'] for r in runs], '{:.1f}')} |"
            )
    lines += ["", *[_ratio(size, found, ours, base) for size, found in rows.items()], ""]
    return "\n".join(lines)


def _ratio(size: int, found: dict[str, list[dict[str, Any]]], ours: str, base: str) -> str:
    pairs = list(zip(found[ours], found[base], strict=True))
    worker = common.spread([o["worker"] / b["worker"] for o, b in pairs], "{:.2f}")
    redis = common.spread([o["redis"] / max(b["redis"], 0.1) for o, b in pairs], "{:.2f}")
    return (f"{size:,} subscribers: this tree's worker {worker}x the baseline's CPU, "
            f"Redis {redis}x, round by round.")  # fmt: skip


if __name__ == "__main__":
    main()
