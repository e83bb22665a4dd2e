"""Route benchmarks (issue 5), on real processes: (a) ingest cost of a coalescing route
next to a plain one, (b) priority-0 latency while a priority-9 backlog drains, and
(c) how long lower-lane events wait under a steady higher-lane load. Each part gets a
fresh valkey + `busbar web` (+ `busbar worker` where something is delivered).

    .venv/bin/python -m bench.routes [--quick]
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import common, routes_report
from bench.common import Sink, SlowSink
from bench.routes_backlog import run_backlog
from bench.routes_ingest import run_ingest
from bench.routes_starve import DELAY, run_starvation

ENV = {"BUSBAR_DELIVERY_CONCURRENCY": "5", "BUSBAR_REDIS_MAX_MEM": str(1 << 30)}
COMMAND = ".venv/bin/python -m bench.routes"


@dataclass(frozen=True)
class Plan:
    """How much each part does: the full run, or --quick for a smoke check."""

    ingest_rounds: int
    ingest_counts: dict[int, int]  # events per measurement, by events per POST
    backlog_rounds: int
    backlog: int  # priority-9 events queued before delivery starts
    urgent_rate: float  # priority-0 events/s, during the drain and in the baseline
    baseline_s: float
    starve_rounds: int
    factors: tuple[float, ...]  # high-lane load as a multiple of the measured capacity
    window_s: float
    low_rate: float  # low-lane events/s during a load
    burst: int  # high-lane events queued at once to measure the capacity


FULL = Plan(5, {500: 50_000, 1: 3_000}, 3, 100_000, 100, 4.0, 3, (0.5, 0.9, 1.5), 6.0, 5, 3_000)
QUICK = Plan(1, {500: 5_000, 1: 300}, 1, 10_000, 100, 1.0, 1, (0.5, 1.5), 2.0, 5, 1_000)


def main(argv: list[str] | None = None) -> None:
    quick = common.quick_flag("bench.routes", __doc__, argv)
    plan = QUICK if quick else FULL
    snap, started = common.others(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="busbar-bench-") as tmp:
        work = Path(tmp)
        with common.web_bus(work / "ingest", env=ENV) as the_bus:
            ingest = run_ingest(the_bus, plan.ingest_rounds, plan.ingest_counts)
        sink: Sink = Sink()
        try:
            with common.web_bus(work / "backlog", env=ENV) as the_bus:
                backlog = run_backlog(
                    the_bus, sink, plan.backlog_rounds, plan.backlog, plan.urgent_rate,
                    plan.baseline_s,
                )  # fmt: skip
        finally:
            with contextlib.suppress(OSError):
                sink.stop()
        sink = SlowSink(DELAY)
        try:
            with common.web_bus(work / "starve", env=ENV) as the_bus, common.worker(the_bus):
                starve = run_starvation(
                    the_bus, sink, plan.starve_rounds, plan.factors, plan.window_s,
                    plan.low_rate, plan.burst,
                )  # fmt: skip
        finally:
            with contextlib.suppress(OSError):
                sink.stop()
    others = (
        f"Processes outside the benchmark used {common.others_since(snap):.1f} CPU-seconds "
        f"during its {time.perf_counter() - started:.0f} s."
    )
    command = COMMAND + (" --quick" if quick else "")
    text = routes_report.report(command, plan, ingest, backlog, starve, others)
    common.write_report("routes", text)
    keep_figures(plan, ingest, backlog, starve)


def keep_figures(plan: Plan, ingest: dict, backlog: list[dict], starve: dict[str, Any]) -> None:
    """Latency CDFs (pooled over rounds) and the headline figures for BENCHMARKS.md."""
    series = {
        "priority 0, nothing queued": [x for r in backlog for x in r["baseline"]],
        f"priority 0, {plan.backlog:,} priority-9 queued": [
            x for r in backlog for x in r["latency"]
        ],
    }
    for f, runs in starve["loads"].items():
        series[f"low lane, high lane at {f:g}x capacity"] = [x for r in runs for x in r["low_wait"]]
    common.write_samples("routes", series)
    bulk = ingest["bulk 500, updates cycling over 300 urls"]
    pairs = zip(bulk["coalescing"], bulk["plain"], strict=True)
    rows = [
        ("coalescing / plain CPU per event, bulk 500 cycling urls",
         common.spread([c["us"] / p["us"] for c, p in pairs], "{:.2f}")),
        ("priority-0 p99 ms, nothing queued",
         common.spread([common.pct(r["baseline"], 99) for r in backlog], "{:.1f}")),
        (f"priority-0 p99 ms, {plan.backlog:,} priority-9 draining",
         common.spread([common.pct(r["latency"], 99) for r in backlog], "{:.1f}")),
        (f"{plan.backlog:,} priority-9 events drained alone in, s",
         common.spread([r["alone"]["drain_s"] for r in backlog], "{:.1f}")),
        (f"the same drain with priority 0 at {plan.urgent_rate:g}/s, s",
         common.spread([r["drain_s"] for r in backlog], "{:.1f}")),
    ]  # fmt: skip
    top = max(starve["loads"])
    during = [f"{r['low_during']}/{r['low_sent']}" for r in starve["loads"][top]]
    rows.append((f"low-lane events delivered while high lane ran at {top:g}x", ", ".join(during)))
    common.write_headlines("routes", rows)


if __name__ == "__main__":
    main()
