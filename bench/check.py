"""`make bench-check`: the publish path and the delivery engine against an earlier commit,
in one run, failing only on a regression beyond the noise the run itself measures.

The earlier commit is BENCH_BASE (`--base`): the previous release, ec7cb31 (0.1.0,
CHANGELOG.md); `--base 73a1eb1` sets a tree against the commit before issue 54's round
of work (ordering keys, filters, schemas, client names), which that issue's aims name.
Its checkout is a git worktree under var/ (bench.serial's checkout(), made once). Run it
before every stop that touches app/web, app/services or app/delivery; about 5-10
minutes on this project's 2-core machine.

What runs, each part one process's worth of real busbar processes, this tree's load
generator and setup driving both commits, the two taking turns round by round:

- publish (bench/check_publish.py): bench.publish's three loads under wrk against a web
  of each commit, each its own code on its own valkey; with two cores or more, the webs
  on one and Redis and wrk on the other (`--pin`): a publish's Redis work and the load
  generator then take nothing from the web's core, so the figures are the web's (a bulk
  publish at 0.85x its base's rate, rounds within 10-18% pinned, had passed unseen in
  shared runs whose spread was 31-54%: docs/performance.md);
- serial, fanout, keys (bench/check_workers.py): a worker of each commit on this tree's
  web and Redis, as bench.serial, bench.fanout and bench.keys do with `--baseline`.

Running each commit's own benchmark from its own tree would compare two benchmarks as
well as two busbars (bench code changes between commits); running today's benchmark
against each commit's processes compares only busbar. The one thing of the baseline's
that must speak today's API is its web's and worker's side of Redis and HTTP, which a
benchmark of the same features has.

The noise: for each figure, the spread of one commit's rounds, (max - min) / median, the
larger of the two commits' and at least MIN_NOISE. A figure regresses when this tree's
median is worse than the baseline's by more than that. Every figure is printed, one
line each, and each regression once more at the end as `REGRESSION ...`; the exit status
is 1 when there is one.

    .venv/bin/python -m bench.check [--base REV] [--only publish,serial,fanout,keys] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable

from bench import check_publish, check_workers, engines, wrk
from bench.check_workers import Figures, Variants
from bench.serial import checkout

BASE = "ec7cb31"  # the previous release (0.1.0, CHANGELOG.md)
MIN_NOISE = 0.05  # a figure within 5% is never called a regression, however still the run
PUBLISH_SECONDS = 2.0


def check_publish_part(variants: Variants, rounds: int) -> Figures:
    pin = len(os.sched_getaffinity(0)) >= 2
    found = check_publish.measure(variants, rounds + 1, PUBLISH_SECONDS, pin)
    return check_publish.figures(found)


PARTS: dict[str, Callable[[Variants, int], Figures]] = {
    "publish": check_publish_part,  # a round is cheap: one more
    "serial": check_workers.check_serial,
    "fanout": check_workers.check_fanout,
    "keys": check_workers.check_keys,
}


def judged(name: str, higher: bool, base: list[float], ours: list[float]) -> tuple[bool, str]:
    """Whether this tree's figure holds against the baseline's, and the line that says so."""
    noise = max(MIN_NOISE, *((max(v) - min(v)) / statistics.median(v) for v in (base, ours) if v))
    b, o = statistics.median(base), statistics.median(ours)
    better = o / b if higher else b / o  # > 1: this tree is better
    ok = better >= 1 - noise
    shown = lambda v: f"{statistics.median(v):,.2f} ({min(v):,.2f}-{max(v):,.2f})"  # noqa: E731
    way = "higher" if higher else "lower"
    return ok, (
        f"{name} ({way} is better): this tree {shown(ours)}, base {shown(base)}: "
        f"{better:.2f}x as good, noise {noise:.0%}: {'ok' if ok else 'REGRESSION'}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.check", description=__doc__.split("\n")[0])
    parser.add_argument("--base", default=BASE, help=f"the commit to set against ({BASE})")
    parser.add_argument("--only", default=",".join(PARTS), help="parts, of: " + ",".join(PARTS))
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each commit a part")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    if unknown := set(names) - set(PARTS):
        parser.error(f"unknown part(s): {', '.join(sorted(unknown))}")
    if "publish" in names and not wrk.available():
        print(f"bench.check: {wrk.MISSING}", file=sys.stderr)
        return 2
    base, ours = f"base {args.base}", engines.tree()
    variants: Variants = {base: checkout(args.base), ours: None}
    lines: list[tuple[bool, str]] = []
    for name in names:
        print(f"=== bench.check: {name}, {ours} against {base}", flush=True)
        for figure, (higher, rounds) in PARTS[name](variants, args.rounds).items():
            lines.append(judged(figure, higher, rounds[base], rounds[ours]))
            print(lines[-1][1], flush=True)
    print(f"\n=== bench.check: {ours} against {base}")
    for _, line in lines:
        print(line)
    failed = [line for ok, line in lines if not ok]
    for line in failed:
        print(f"REGRESSION {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
