"""The markdown of bench.delivery (bench/results/delivery.md): its own module, so the
benchmark's logic stays readable next to a long report."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench import common

if TYPE_CHECKING:
    from bench.delivery import Plan


def report(
    command: str,
    plan: Plan,
    tp: dict[int, list[dict]],
    lat: dict[str, list[dict]],
    drops: dict,
    others: str,
) -> str:
    """Throughput, latency and CPU tables, medians of the rounds with min-max."""
    lines = [
        "# Delivery benchmark",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        f"Medians of {plan.rounds} round(s) (min-max). One `busbar worker` (5 delivery "
        "threads), `busbar web` with its defaults (2 gunicorn processes x 8 threads), valkey "
        "from the pip wheel, subscriber: stdlib ThreadingHTTPServer (HTTP/1.1 keep-alive) in "
        "its own process, all on the same machine over loopback. BUSBAR_REDIS_MAX_MEM is "
        "raised to 1 GiB so that Autodrop never sheds the backlog of a run.",
        "",
        "## Throughput (max 100, timeout 0; publishing in POSTs of up to 500 events meanwhile)",
        "",
        "Latency here is publish -> receive of a saturated bus: mostly time spent queued "
        "behind the events published before.",
        "",
        "| subscribers | events | delivered events/s | publish events/s accepted "
        "| latency p50 ms | latency p99 ms | all delivered exactly once |",
        "|---|---|---|---|---|---|---|",
    ]
    for subs, runs in tp.items():
        exact = "yes" if all(r["complete"] for r in runs) else "NO"
        p50 = [common.pct(r["raw_all"], 50) for r in runs]
        p99 = [common.pct(r["raw_all"], 99) for r in runs]
        lines.append(
            f"| {subs} | {plan.published[subs]:,} x {subs} "
            f"| {common.spread([r['rate'] for r in runs])} "
            f"| {common.spread([r['publish_rate'] for r in runs])} "
            f"| {common.spread(p50)} | {common.spread(p99)} | {exact} |"
        )
    lines += [
        "",
        f"## Latency at a steady offered load ({plan.seconds:g} s per run, single-event "
        "publishes from 8 paced client threads)",
        "",
        "Raw: publish sent -> subscriber received. Added: received minus when the event's "
        "batch became due (when the last event of a full batch was sent, else first + "
        "timeout), i.e. latency minus the batching wait. Delivered/s: events received (at "
        "all subscribers) over first send -> last receive; below offered x subscribers "
        "means a growing backlog.",
        "",
        "| case | offered/s achieved | delivered/s | publisher late p99 ms | raw p50 ms "
        "| raw p99 ms | added p50 ms | added p99 ms | all arrived |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for case, runs in lat.items():
        cells = [common.spread([r[k] for r in runs]) for k in ("achieved", "delivered")]
        cells.append(common.spread([r["late_p99"] for r in runs], "{:.1f}"))
        cells += [
            common.spread([r[k][j] for r in runs], "{:.1f}")
            for k in ("raw", "added")
            for j in (0, 1)
        ]
        ok = "yes" if all(r["complete"] for r in runs) else "NO"
        lines.append(f"| {case} | " + " | ".join(cells) + f" | {ok} |")
    lines += ["", "## CPU per delivered event (microseconds, median of rounds)", ""]
    lines += [f"`others`: every process outside the benchmark. {others}", ""]
    lines += common.median_table(
        "cpu_us", {**{f"throughput, {n} subscriber(s)": r for n, r in tp.items()}, **lat}
    )
    lines += [
        f"\nEvents dropped or expired by busbar during the benchmark: {drops or 'none'}\n",
    ]
    return "\n".join(lines)
