"""bench.delivery's report when it runs several workers: first this tree against the
baseline, case by case, then each worker's full tables as bench.delivery_report
renders them for one worker (its intro, which describes a single worker, left out)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench import common, versus
from bench.delivery_report import report as one_report

if TYPE_CHECKING:
    from bench.delivery import Plan

Figure = Callable[[dict[str, Any]], float]


@dataclass
class Runs:
    """One worker's runs over the rounds: throughput by subscribers, latency by case."""

    who: versus.Contender
    plan: Plan
    tp: dict[int, list[dict]] = field(default_factory=dict)
    lat: dict[str, list[dict]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tp = {subs: [] for subs in self.plan.published}
        self.lat = {case: [] for case in self.plan.latency}


def added(j: int) -> Figure:
    """The figure of a latency case: what the j-th quantile added, ms."""
    return lambda r: r["added"][j]


def row(name: str, runs: list[list[dict]], figure: Figure, fmt: str) -> str:
    """A table row: each worker's median (min-max), then each one's ratio to the first
    (the baseline), round by round; a worker that did not run the case is left blank."""
    base = [figure(r) for r in runs[0]]
    cells = [common.spread(base, fmt)]
    for got in runs[1:]:
        ours = [figure(r) for r in got]
        cells += [common.spread(ours, fmt), f"{versus.ratio(ours, base)}x"] if ours else ["", ""]
    return f"| {name} | " + " | ".join(cells) + " |"


def comparison(workers: list[Runs]) -> list[str]:
    """The headline table: every case, baseline first."""
    header = [f"baseline: {workers[0].who.label}, {workers[0].who.concurrency}"]
    for w in workers[1:]:
        header += [f"{w.who.label}, {w.who.concurrency}", "ratio"]
    lines = ["| case | " + " | ".join(header) + " |", "|---" * (len(header) + 1) + "|"]
    for subs in workers[0].tp:
        runs = [w.tp[subs] for w in workers]
        name = f"throughput, {subs} subscriber(s):"
        lines += [
            row(f"{name} delivered events/s", runs, lambda r: r["rate"], "{:,.0f}"),
            row(f"{name} worker CPU µs/event", runs, lambda r: r["cpu_us"]["worker"], "{:.1f}"),
            row(f"{name} round trips/event", runs, lambda r: r["round_trips"], "{:.3f}"),
        ]
    for case in workers[0].lat:
        for j, q in enumerate(("p50", "p99")):
            lines.append(row(
                f"latency, {case}: added {q} ms",
                [w.lat[case] for w in workers], added(j), "{:.1f}",
            ))  # fmt: skip
    return lines


def report(command: str, plan: Plan, workers: list[Runs], drops: dict, others: str) -> str:
    """The comparison, then each worker's own tables (headings one level down)."""
    base, ours = workers[0].who, workers[1].who
    lines = [
        "# Delivery benchmark",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        f"Medians of {plan.rounds} round(s) (min-max). `busbar web` with its defaults (2 "
        "gunicorn processes x 8 threads), valkey from the pip wheel, subscriber: stdlib "
        "ThreadingHTTPServer (HTTP/1.1 keep-alive) in its own process, all on the same "
        "machine over loopback. BUSBAR_REDIS_MAX_MEM is raised to 1 GiB so that Autodrop "
        "never sheds the backlog of a run. One `busbar worker` at a time, each started for "
        "its runs and stopped after them, on the same Redis and web: the baseline, "
        f"{base.label.split('(')[1].rstrip(')')} from a worktree of its commit, and this "
        "tree, each with the product's default concurrency (baseline "
        f"{base.concurrency}; this tree {ours.concurrency}), the headline comparison: what "
        "an operator who changes nothing gets. "
        + (
            "The throughput runs, and the latency runs with more subscribers than the "
            "baseline has threads, also ran with this tree at the baseline's concurrency, "
            "to compare the engines with that difference taken out. "
            if len(workers) > 2
            else ""
        )
        + "Each throughput case is run by every worker back to back (a worker started for "
        "it), then each worker runs its latency cases; the order of the workers turns "
        "round each round; ratios are taken round by round "
        "(this tree / baseline: above 1 is faster for rates, slower for latencies). "
        "Round trips: EVALSHA and BLMOVE Redis ran during a throughput run (the "
        "publishes' own scripts, one per 500 events, included), per event delivered.",
        "",
        f"## This tree against {base.label.split(' (')[0]}",
        "",
        *comparison(workers),
    ]
    for w in workers:
        detail = one_report(command, plan, w.tp, {k: v for k, v in w.lat.items() if v}, {}, others)
        detail = detail[detail.index("\n## Throughput") :]
        if not any(w.lat.values()):  # throughput only: no empty latency table
            detail = detail[: detail.index("\n## Latency")] + detail[detail.index("\n## CPU") :]
        tables = detail.strip().splitlines()
        lines += ["", f"## {w.who.label}, {w.who.concurrency}", ""]
        lines += ["#" + x if x.startswith("#") else x for x in tables if "dropped or" not in x]
    lines += [
        "",
        f"Events dropped or expired by busbar during the benchmark: {drops or 'none'}",
        "",
    ]
    return "\n".join(lines)
