"""Spark side of the benchmark suite: runs `python -m bench.lake_run` (delivery log ->
Parquet lake) several times, each in its own process so every run pays a cold JVM, and
turns its printed figures into medians with min-max, next to the ratios that matter:
warm ingest against the decode-only ceiling, and the first (cold) ingest against the
warm one. bench.lake_run stays the authority on how each figure is taken.

    .venv/bin/python -m bench.lake [--quick]
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

from bench import common

COMMAND = ".venv/bin/python -m bench.lake"
PATTERNS = {  # figure: (regex over bench.lake_run's output, unit)
    "decode only, events/s (1 core, no Spark)": (r"decode only.*?: ([\d,]+) events/s", ""),
    "session start, s (JVM + SparkContext)": (r"session start \([^)]*\): ([\d.]+) s", "s"),
    "first ingest, events/s (cold Python workers)": (
        r"first ingest.*= ([\d,]+) events/s", ""),
    "second ingest, events/s (warm)": (r"second ingest.*= ([\d,]+) events/s", ""),
    "first ingest, s": (r"first ingest.*in ([\d.]+) s =", "s"),
    "second ingest, s": (r"second ingest.*in ([\d.]+) s =", "s"),
    "replay, lake -> queue, events/s (Spark started)": (r"replay \(lake.*= ([\d,]+) events/s", ""),
    "replay, s": (r"replay \(lake.*in ([\d.]+) s =", "s"),
}  # fmt: skip


def run_once(events: int) -> tuple[dict[str, float], float, str]:
    """One bench.lake_run process: its figures, its wall time, and its output's last lines
    (kept in the report when a figure is missing)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bench.lake_run", "--events", str(events)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    took = time.perf_counter() - started
    out = done.stdout + done.stderr
    found = {}
    for name, (pattern, _) in PATTERNS.items():
        if match := re.search(pattern, out):
            found[name] = float(match.group(1).replace(",", ""))
    if done.returncode or len(found) != len(PATTERNS):
        raise RuntimeError(f"bench.lake_run exit {done.returncode}, output:\n{out[-3000:]}")
    printed = [line for line in done.stdout.splitlines() if not line.startswith(("Using", "To "))]
    return found, took, "\n".join(printed)


def main(argv: list[str] | None = None) -> None:
    quick = common.quick_flag("bench.lake", __doc__, argv)
    events, rounds = (20_000, 1) if quick else (200_000, 3)
    runs, took, printed = [], [], ""
    for r in range(rounds):
        figures, seconds, printed = run_once(events)
        runs.append(figures)
        took.append(seconds)
        print(f"round {r}: {figures} in {seconds:.0f} s", flush=True)
    warm = [r["second ingest, events/s (warm)"] for r in runs]
    ceiling = [r["decode only, events/s (1 core, no Spark)"] for r in runs]
    cold = [r["first ingest, events/s (cold Python workers)"] for r in runs]
    command = COMMAND + (" --quick" if quick else "")
    lines = [
        "# Spark ingest of the delivery log",
        "",
        f"`{command}` from the repository root, which runs `.venv/bin/python -m bench.lake_run "
        f"--events {events}` {rounds} time(s), each a new process (cold JVM); "
        f"{common.machine()}. Each run writes {events:,} events (batches of 10) into empty "
        "delivery-log streams of a throwaway valkey, starts a local[2] SparkSession, "
        "ingests them into a Parquet lake (first ingest: Python workers start), writes as "
        "many again and ingests those (warm); then replays the whole lake (twice as many "
        "events) to one subscriber with `busbar spark replay`'s job in the same session "
        "(the selection's Spark jobs, the driver's walk in order, the queueing steps; "
        "no worker runs, so nothing is delivered meanwhile). Median (min-max); ratios per run.",
        "",
        "| figure | median (min-max) |",
        "|---|---|",
    ]
    for name, (_, unit) in PATTERNS.items():
        fmt = "{:.1f}" if unit == "s" else "{:,.0f}"
        lines.append(f"| {name} | {common.spread([r[name] for r in runs], fmt)} |")
    ratios = {
        "warm ingest / decode-only ceiling": [a / b for a, b in zip(warm, ceiling, strict=True)],
        "warm / cold ingest rate": [a / b for a, b in zip(warm, cold, strict=True)],
    }
    for name, values in ratios.items():
        lines.append(f"| {name} | {common.spread(values, '{:.2f}')} |")
    lines += [
        f"| whole bench.lake_run process, s | {common.spread(took, '{:.0f}')} |",
        "",
        "Output of the last run:",
        "",
        "```",
        printed,
        "```",
        "",
    ]
    common.write_report("spark", "\n".join(lines))
    common.write_headlines("spark", [
        ("Spark warm ingest, events/s", common.spread(warm)),
        ("Spark replay, lake -> queue, events/s",
         common.spread([r["replay, lake -> queue, events/s (Spark started)"] for r in runs])),
        ("Spark session start (JVM), s",
         common.spread([r["session start, s (JVM + SparkContext)"] for r in runs], "{:.1f}")),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
