"""Numbers and where they go: machine line, medians, percentiles, CPU accounting from
/proc, and the files a benchmark leaves in the results folder (report, latency samples
for the plots, headline figures for BENCHMARKS.md). No processes are started here;
`bench.common` re-exports all of it next to the process harness.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from spec.integration.processes import children_of

RESULTS = Path(__file__).resolve().parent / "results"
RESULTS_ENV = "BENCH_RESULTS_DIR"  # set by `python -m bench` so a --quick run keeps apart
QUANTILES = 1000  # points kept per latency series: a smooth CDF, a small JSON file


def machine() -> str:
    """One line naming what the figures were measured on, so they can be compared later."""
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    model = next((x.split(":", 1)[1].strip() for x in lines if x.startswith("model name")), "?")
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}, {now}"


def spread(values: Sequence[float], fmt: str = "{:,.0f}") -> str:
    """Median with min-max: one round alone can be thrown off by the other processes."""
    if not values:
        return "n/a"
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{fmt.format(mid)} ({fmt.format(low)}-{fmt.format(high)})"


def pct(values: list[float], q: int) -> float:
    """q-th percentile (nearest rank is enough for thousands of samples)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, len(ordered) * q // 100)]


def median_table(field: str, rows: dict[str, list[dict]]) -> list[str]:
    """Markdown rows: for each case, the median over rounds of each entry of run[field]."""
    names = list(next(iter(rows.values()))[0][field])
    lines = ["| case | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for case, runs in rows.items():
        cells = [f"{statistics.median(r[field][n] for r in runs):.1f}" for n in names]
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return lines


def results_dir() -> Path:
    """bench/results, unless the runner points a --quick run elsewhere: smoke figures
    must never overwrite the ones a full run committed."""
    return Path(os.environ.get(RESULTS_ENV) or RESULTS)


def write_report(name: str, text: str) -> Path:
    """Print and keep the report: <results>/<name>.md is what BENCHMARKS.md is built from."""
    path = results_dir() / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(text)
    return path


def write_samples(name: str, series: dict[str, list[float]], unit: str = "ms") -> Path:
    """Latency distributions for bench.plots, as QUANTILES+1 quantiles per series (pooled
    over rounds): a CDF needs no more, and the raw samples would bloat the repository."""
    kept: dict[str, dict] = {}
    for label, values in series.items():
        if values:
            ordered = sorted(values)
            last = len(ordered) - 1
            points = [round(ordered[round(i * last / QUANTILES)], 2) for i in range(QUANTILES + 1)]
            kept[label] = {"n": len(ordered), "quantiles": points}
    path = results_dir() / f"{name}.samples.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"unit": unit, "series": kept}))
    return path


def write_headlines(name: str, rows: list[tuple[str, str]]) -> Path:
    """The few figures BENCHMARKS.md puts in its summary table, each already formatted
    as median (min-max); the report itself stays the authority."""
    path = results_dir() / f"{name}.headlines.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1))
    return path


def quick_flag(prog: str, doc: str | None, argv: list[str] | None) -> bool:
    """Every benchmark takes --quick (short durations, one round): the runner's smoke check."""
    parser = argparse.ArgumentParser(prog=prog, description=(doc or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short run, for a smoke check")
    return bool(parser.parse_args(argv).quick)


def _stat(pid: int | str) -> tuple[str, float]:
    """(parent pid, user+system CPU seconds) of a process; ("", 0) when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return "", 0.0
    return fields[1], (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, tree: bool = True) -> float:
    """CPU of a process and, with `tree`, its descendants (gunicorn's workers are
    children of its master)."""
    return sum(_stat(one)[1] for one in {pid, *(children_of(pid) if tree else ())})


def busy_seconds() -> float:
    """CPU seconds the whole machine has been busy: what anything else running on the
    shared cores took shows as the difference from our own processes."""
    user, nice, system, _, _, irq, softirq, steal = Path("/proc/stat").read_text().split()[1:9]
    busy = sum(int(x) for x in (user, nice, system, irq, softirq, steal))
    return busy / os.sysconf("SC_CLK_TCK")


def wait_quiet(limit: float = 3.0) -> None:
    """Between rounds, wait (a bounded while) for other jobs on the box to finish: on 2
    cores they would be measured as busbar's slowness. The CPU columns show what's left."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = busy_seconds()
        time.sleep(0.5)
        if busy_seconds() - before < 0.1:  # under 0.2 of a core
            return


def others() -> dict[str, float]:
    """CPU so far of every user process outside this benchmark's tree: another job on the
    same 2 cores skews every figure, so the reports say how much of that there was."""
    ours = {str(os.getpid()), *map(str, children_of(os.getpid()))}
    found = {p.name: _stat(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()}
    return {  # the kernel's own threads (parent 2, or 0 for kthreadd) are not counted
        pid: cpu
        for pid, (ppid, cpu) in found.items()
        if ppid not in ("", "0", "2") and pid not in ours
    }


def others_since(before: dict[str, float]) -> float:
    """CPU seconds other processes used since `before` (those that exited are missed)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in others().items())
