"""Every benchmark in one go (`make bench`): each runs as its own process, one after
another, so a crash or a hang in one loses only that one (it is reported, and the rest
run); then the latency plots, then BENCHMARKS.md is assembled from the results.

    .venv/bin/python -m bench            # full run, about 40 minutes: BENCHMARKS.md
    .venv/bin/python -m bench --quick    # smoke check, a few minutes: var/bench-quick/
    .venv/bin/python -m bench --only routes,memory   # the rest as their last run left them

A --quick run writes its results and its BENCHMARKS.md under var/bench-quick/ (ignored
by git), so smoke figures never overwrite those of a full run.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from bench import common
from bench.assemble import Step, assemble, record
from bench.measure import RESULTS_ENV
from spec.integration.processes import children_of

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "var" / "bench-logs"
QUICK_RESULTS = ROOT / "var" / "bench-quick"
STEPS = {  # results name: (module and its arguments, minutes allowed in a full run)
    "publish": ("bench.publish", 8),
    "delivery": ("bench.delivery", 16),
    "jobqueue": ("bench.jobqueue", 8),
    "memory": ("bench.memory", 5),
    "routes": ("bench.routes", 10),
    "spark": ("bench.lake", 12),
    "scripts": ("bench.scripts", 8),
    "cluster": ("bench.cluster", 10),
    "fanout": ("bench.fanout", 15),
    "serial": ("bench.serial", 6),
    "isolation": ("bench.isolation", 8),
    "isolation3000": ("bench.isolation --holes 3000", 12),
    "policy": ("bench.policy", 14),
    "replicas": ("bench.replicas", 10),
    "origin": ("bench.origin", 12),
    "keys": ("bench.keys", 15),
    "flaky": ("bench.flaky", 22),
    "blip": ("bench.blip", 12),
    "filters": ("bench.filters", 5),
    "transforms_delivery": ("bench.transforms_delivery", 12),
    "schemas": ("bench.schemas", 4),
    "mtls": ("bench.mtls", 5),
    "upkeep": ("bench.upkeep", 12),
    "listing": ("bench.listing", 8),
    "stall": ("bench.stall", 8),
    "destinations": ("bench.destinations", 25),
}
QUICK_MINUTES = 5


def stop(process: subprocess.Popen) -> None:
    """A benchmark past its time: SIGINT first, so its context managers stop the bus it
    started; then SIGKILL, by pid, for it and whatever it left behind."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGINT)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        for pid in [*children_of(process.pid), process.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait()


def command_of(name: str, quick: bool) -> list[str]:
    return [sys.executable, "-m", *STEPS[name][0].split(), *(["--quick"] if quick else [])]


def shown(command: list[str]) -> str:
    """The command as a reader types it from the repository root."""
    return " ".join([".venv/bin/python", *command[1:]])


def tee(source: IO[bytes], log: IO[bytes]) -> None:
    """A benchmark's output, line by line, to the terminal and to its log file."""
    for line in source:
        log.write(line)
        sys.stdout.write(line.decode(errors="replace"))
        sys.stdout.flush()


def run_step(name: str, quick: bool, results: Path) -> Step:
    """One benchmark as a subprocess, its output both shown and kept in var/bench-logs."""
    argv, minutes = command_of(name, quick), STEPS[name][1]
    LOGS.mkdir(parents=True, exist_ok=True)
    env = os.environ | {RESULTS_ENV: str(results), "PYTHONUNBUFFERED": "1"}
    started = time.perf_counter()
    print(f"\n=== {name}: {shown(argv)}", flush=True)
    with (LOGS / f"{name}.log").open("wb") as log:
        process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        reader = threading.Thread(target=tee, args=(process.stdout, log), daemon=True)
        reader.start()
        try:
            status = process.wait((QUICK_MINUTES if quick else minutes) * 60)
            outcome = "ok" if status == 0 else f"failed (exit {status})"
        except subprocess.TimeoutExpired:
            stop(process)
            outcome = "timed out"
        except KeyboardInterrupt:
            stop(process)
            raise
        reader.join(10)
    seconds = time.perf_counter() - started
    print(f"=== {name}: {outcome} in {seconds:.0f} s (log: {LOGS / f'{name}.log'})", flush=True)
    finished = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    step = Step(name, shown(argv), outcome, seconds, finished)
    record(results, step)
    return step


def plots(results: Path) -> str:
    """The PNGs, in a process of their own too: a missing matplotlib costs the plots only."""
    env = os.environ | {RESULTS_ENV: str(results)}
    done = subprocess.run(
        [sys.executable, "-m", "bench.plots"], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    print(done.stdout + done.stderr, end="")
    return "ok" if done.returncode == 0 else f"plots failed: {done.stderr.strip()[-300:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs, for a smoke check")
    parser.add_argument("--only", default="", help=f"comma-separated subset of {','.join(STEPS)}")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(STEPS)
    if unknown := set(names) - set(STEPS):
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    results = QUICK_RESULTS if args.quick else common.RESULTS
    results.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    steps = [
        run_step(name, args.quick, results)
        if name in names
        else Step(name, shown(command_of(name, args.quick)), "not run", 0.0)
        for name in STEPS
    ]
    plotted = plots(results)
    target = results / "BENCHMARKS.md" if args.quick else ROOT / "BENCHMARKS.md"
    command = " ".join([".venv/bin/python -m bench", *(argv if argv is not None else sys.argv[1:])])
    assemble(results, target, steps, args.quick, command, started)
    failed = [s for s in steps if s.status not in ("ok", "not run")]
    print(f"\nwrote {target}; plots: {plotted}")
    for step in failed:
        print(f"FAILED: {step.name}: {step.status} (log: {LOGS / f'{step.name}.log'})")
    return 1 if failed or plotted != "ok" else 0


if __name__ == "__main__":
    raise SystemExit(main())
