"""The markdown of bench.routes (bench/results/routes.md), apart from the measuring code.
Every figure is a median over rounds with min-max; ratios are taken within a round
(the two sides measured back to back) before the median, so drift cancels out."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from bench import common
from bench.routes_ingest import WORKLOADS
from bench.routes_starve import DELAY, HIGH, LOW, MAX

if TYPE_CHECKING:
    from bench.routes import Plan


def ratio(top: list[float], bottom: list[float]) -> str:
    return common.spread([a / b for a, b in zip(top, bottom, strict=True)], "{:.2f}")


def ingest_section(plan: Plan, runs: dict[str, dict[str, list]]) -> list[str]:
    lines = [
        "## a) Ingest: coalescing route vs plain route",
        "",
        "`busbar web` + valkey, no worker: events stay queued. Two subscribers with the same "
        "route (no priority, max 100) but for `coalesce`, each on its own topic; the same "
        "`update` events published to each, interleaved, order swapped every round. Each "
        "measurement starts from a fresh subscriber primed with one cycle of the urls, so "
        "`cycling` measures pure replacements (coalescing) against pure appends (plain); "
        "`every url new` is the coalescing route's worst case (a map lookup and insert per "
        f"event, nothing replaced). Events per measurement: {plan.ingest_counts[500]:,} in "
        f"bulk POSTs (1 client thread), {plan.ingest_counts[1]:,} single-event POSTs (8 "
        f"threads). {plan.ingest_rounds} round(s). CPU: web (gunicorn, all processes) + "
        "valkey, per event.",
        "",
        "| workload | plain events/s | coalescing events/s | rate c/p | plain CPU us/event "
        "| coalescing CPU us/event | CPU c/p | valkey us/event p / c | replaced in place |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for workload, kinds in runs.items():
        plain, coal = kinds["plain"], kinds["coalescing"]
        count = plan.ingest_counts[WORKLOADS[workload][0]]
        replaced = common.spread([c["coalesced"] / count * 100 for c in coal], "{:.0f}%")
        valkey = f"{common.spread([p['redis'] for p in plain], '{:.1f}')} / " + common.spread(
            [c["redis"] for c in coal], "{:.1f}"
        )
        lines.append(
            f"| {workload} | {common.spread([p['rate'] for p in plain])} "
            f"| {common.spread([c['rate'] for c in coal])} "
            f"| {ratio([c['rate'] for c in coal], [p['rate'] for p in plain])} "
            f"| {common.spread([p['us'] for p in plain], '{:.1f}')} "
            f"| {common.spread([c['us'] for c in coal], '{:.1f}')} "
            f"| {ratio([c['us'] for c in coal], [p['us'] for p in plain])} | {valkey} "
            f"| {replaced} |"
        )
    return lines


def backlog_section(plan: Plan, runs: list[dict[str, Any]]) -> list[str]:
    quiet, busy = [r["baseline"] for r in runs], [r["latency"] for r in runs]
    lines = [
        "",
        f"## b) Priority 0 while {plan.backlog:,} priority-9 events drain",
        "",
        "One subscriber (max 100, timeout 0), topic A on priority 9, topic B on priority 0; "
        "fast local subscriber, `busbar worker` with 5 threads. Baseline: priority-0 events "
        f"at {plan.urgent_rate:g}/s with nothing else queued ({plan.baseline_s:g} s). Then "
        f"the worker stops, {plan.backlog:,} priority-9 events are published in POSTs of "
        "500 and a new worker drains them alone; the same again, now with priority-0 events "
        f"going out at {plan.urgent_rate:g}/s until the backlog has arrived: latency = "
        "publish sent -> received, for those sent before the last backlog event arrived. "
        f"{plan.backlog_rounds} round(s); "
        "percentiles per round, then median (min-max) over rounds.",
        "",
        "| priority-0 latency | p50 ms | p99 ms | max ms | events per round |",
        "|---|---|---|---|---|",
    ]
    for name, sets in (("nothing queued (baseline)", quiet), ("backlog draining", busy)):
        cells = [common.spread([common.pct(s, q) for s in sets], "{:.1f}") for q in (50, 99)]
        cells.append(common.spread([max(s) for s in sets], "{:.1f}"))
        lines.append(
            f"| {name} | " + " | ".join(cells) + f" | {common.spread([len(s) for s in sets])} |"
        )
    p50 = ratio([common.pct(s, 50) for s in busy], [common.pct(s, 50) for s in quiet])
    p99 = ratio([common.pct(s, 99) for s in busy], [common.pct(s, 99) for s in quiet])
    with_urgent, alone = runs, [r["alone"] for r in runs]
    lines += [
        f"| ratio draining / baseline | {p50} | {p99} | | |",
        "",
        f"Drain of the {plan.backlog:,} priority-9 events, first to last received (the "
        "backlog is published again for each drain):",
        "",
        "| drain | seconds | events/s | from worker start, s | CPU us per backlog event, "
        "worker / valkey / web |",
        "|---|---|---|---|---|",
    ]
    for name, got in (("alone", alone), (f"with priority 0 at {plan.urgent_rate:g}/s",
                                         with_urgent)):  # fmt: skip
        seconds = [r["drain_s"] for r in got]
        cpu = " / ".join(
            common.spread([r["cpu_us"][k] for r in got], "{:.1f}")
            for k in ("worker", "redis", "web")
        )
        lines.append(
            f"| {name} | {common.spread(seconds, '{:.1f}')} "
            f"| {common.spread([plan.backlog / d for d in seconds])} "
            f"| {common.spread([r['from_spawn_s'] for r in got], '{:.1f}')} | {cpu} |"
        )
    slower = ratio([r["drain_s"] for r in with_urgent], [r["drain_s"] for r in alone])
    complete = all(r["complete"] and r["alone"]["complete"] for r in runs)
    lines += [
        f"| ratio with / alone | {slower} | | | |",
        "",
        f"Every event arrived: {'yes' if complete else 'NO'}; priority-0 publisher late p99 "
        f"{common.spread([r['late_p99'] for r in runs], '{:.1f}')} ms. With timeout 0 each "
        "priority-0 event is a batch of its own, and every batch is a whole delivery cycle "
        "(begin, POST, ack) of the subscriber's single delivery in flight.",
    ]
    return lines


def starve_section(plan: Plan, out: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## c) Starvation of a lower lane under a steady higher-lane load",
        "",
        f"One subscriber that answers each POST after {DELAY * 1000:.0f} ms (a subscriber "
        f"doing work), max {MAX}, timeout 0; topic H on priority {HIGH}, topic L on "
        f"priority {LOW}. Capacity C = events/s it takes from a queue of full batches, "
        f"measured each round: {common.spread(out['capacity'])} events/s. Then H gets f x C "
        f"events/s in POSTs of {MAX} (full batches) and L {plan.low_rate:g} single "
        f"events/s, both for {plan.window_s:g} s; then both stop and everything is "
        f"awaited. {plan.starve_rounds} round(s). Wait = publish sent -> received.",
        "",
        "| H load | H offered events/s | H delivered/s during load | H latency p50 ms "
        "| L delivered during load | L wait p50 ms | L wait p99 ms | L wait max ms "
        "| last L arrived after load stopped, s (0: during it) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for f, runs in out["loads"].items():
        during = ", ".join(f"{r['low_during']}/{r['low_sent']}" for r in runs)
        cells = [common.spread([r[k] for r in runs]) for k in ("offered", "high_delivered")]
        cells.append(common.spread([r["high_p50"] for r in runs]))
        cells.append(during)
        cells += [common.spread([common.pct(r["low_wait"], q) for r in runs]) for q in (50, 99)]
        cells.append(common.spread([max(r["low_wait"]) for r in runs]))
        cells.append(common.spread([max(0.0, r["low_after_stop_s"]) for r in runs], "{:.1f}"))
        lines.append(f"| {f:g} x C | " + " | ".join(cells) + " |")
    return [*lines, "", *verdict(out)]


def verdict(out: dict[str, Any]) -> list[str]:
    """The plain statement the figures support, written from them: whether the high
    lane kept up decides what the low lane got."""
    said = []
    for f, runs in out["loads"].items():
        kept = statistics.median(r["high_delivered"] / r["offered"] for r in runs)
        wait = {q: common.spread([common.pct(r["low_wait"], q) for r in runs]) for q in (50, 99)}
        during = ", ".join(f"{r['low_during']}/{r['low_sent']}" for r in runs)
        if kept < 0.95:
            after = common.spread([r["low_after_stop_s"] for r in runs], "{:.1f}")
            said.append(
                f"- At {f:g} x capacity the high lane outran delivery (it delivered "
                f"{kept:.0%} of what arrived) and its backlog grew. Low-lane events delivered "
                f"while the load lasted: {during} (any that got through arrived before the "
                "backlog built up); the rest waited until the high lane was empty, the last "
                f"{after} s after the high load stopped (median wait {wait[50]} ms). A high "
                "lane that keeps arriving faster than delivery starves the lower lanes for "
                "as long as it lasts: they leave only by ttl expiry or Autodrop."
            )
        else:
            said.append(
                f"- At {f:g} x capacity the high lane kept up and low-lane events took the "
                f"slots it left idle: {during} delivered during the load, median wait "
                f"{wait[50]} ms, p99 {wait[99]} ms."
            )
    return said


def report(command: str, plan: Plan, ingest: dict, backlog: list, starve: dict,
           others: str) -> str:  # fmt: skip
    lines = [
        "# Routes benchmark (issue 5)",
        "",
        f"`{command}` from the repository root; {common.machine()}. valkey from the pip "
        "wheel, `busbar web` with its defaults (2 gunicorn processes x 8 threads), all on "
        f"one machine over loopback. {others}",
        "",
        *ingest_section(plan, ingest),
        *backlog_section(plan, backlog),
        *starve_section(plan, starve),
        "",
    ]
    return "\n".join(lines)
