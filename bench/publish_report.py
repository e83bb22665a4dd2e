"""bench.publish's report: both generators side by side, each against its own floor, and
what each generator costs per request (the reason their ratios differ)."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

from bench import common, publish_profile
from bench.loadgen import Load, Sample

# req/s, the original Routemaster's single publish under wrk -t2 -c8 on this machine, from
# bench.routemaster (2026-11-25, 2 cores AMD EPYC; docs/web.md): Routemaster is Ruby and
# not run by `make bench`, so its figure is from that run; bench.routemaster gives the
# ratio measured side by side (6.69x then). Issue 16's machine measured 640.
ROUTEMASTER = 1_563
ROLES = ("web", "redis", "client", "other")
NAMES = {"python": "Python threads", "wrk": "wrk"}
Round = dict[str, list[Sample]]


def per_round(rounds: list[Round], gen: str, pick: Callable[[list[Sample]], float]) -> list[float]:
    return [pick(r[gen]) for r in rounds]


def ratio(samples: list[Sample]) -> float:
    """Single publish over the floor, within one round."""
    return samples[1].rate / samples[0].rate


def rows(config: str, plan: list[Load], rounds: list[Round]) -> list[str]:
    out = []
    for gen in rounds[0]:
        for i, load in enumerate(plan):
            samples = [r[gen][i] for r in rounds]
            cpu = {k: statistics.median(s.cpu[k] for s in samples) for k in ROLES}
            client = statistics.median(s.micros("client") for s in samples)
            unit = "req/s" if load.per_request == 1 else "events/s"
            share = common.spread(per_round(rounds, gen, ratio), "{:.2f}") if i == 1 else ""
            out.append(
                f"| {config} | {NAMES[gen]} | {load.name} "
                f"| {common.spread([s.rate for s in samples])} {unit} "
                f"| {common.spread([s.p50 for s in samples], '{:.2f}')} "
                f"| {common.spread([s.p99 for s in samples], '{:.2f}')} | {share} "
                f"| {' / '.join(f'{cpu[k]:.2f}' for k in ROLES)} | {client:,.0f} |"
            )
    return out


def why(rounds: list[Round]) -> list[str]:
    """Per generator: what it costs per request and the cores it leaves the server."""
    out = [
        "| generator | client CPU per request, floor / publish | cores left to web + Redis, "
        "floor / publish | web CPU per request, floor / publish | publish/floor |",
        "|---|---|---|---|---|",
    ]
    for gen in rounds[0]:
        floor = [r[gen][0] for r in rounds]
        single = [r[gen][1] for r in rounds]

        def med(samples: list[Sample], value: Callable[[Sample], float]) -> float:
            return statistics.median(value(s) for s in samples)

        client = [med(x, lambda s: s.micros("client")) for x in (floor, single)]
        server = [med(x, lambda s: s.cpu["web"] + s.cpu["redis"]) for x in (floor, single)]
        web = [med(x, lambda s: s.micros("web")) for x in (floor, single)]
        out.append(
            f"| {NAMES[gen]} | {client[0]:,.0f} / {client[1]:,.0f} µs "
            f"| {server[0]:.2f} / {server[1]:.2f} | {web[0]:,.0f} / {web[1]:,.0f} µs "
            f"| {common.spread(per_round(rounds, gen, ratio), '{:.2f}')} |"
        )
    return out


def verdict(rounds: list[Round]) -> list[str]:
    """The table above in a sentence, from this run's figures (both generators only)."""
    if set(rounds[0]) != {"python", "wrk"}:
        return []
    cost = {g: statistics.median(r[g][0].micros("client") for r in rounds) for g in rounds[0]}
    web = {g: statistics.median(r[g][0].micros("web") for r in rounds) for g in rounds[0]}
    return [
        f"At the floor the Python threads spent {cost['python']:,.0f} µs of CPU per request, "
        f"{cost['python'] / web['python']:.2f} of what the server itself spent "
        f"({web['python']:,.0f} µs); wrk spent {cost['wrk']:,.0f} µs. The generator's cost "
        "is about the same for both loads, so with the Python threads it is added to both "
        "sides of the ratio and pulls it towards 1; wrk leaves the cores to the server, and "
        "its ratio is the one to compare with other servers.",
        "",
    ]


def gunicorn(rounds: list[Round], pieces: dict[str, float]) -> float | None:
    """Web CPU per request at the wrk floor, less what the WSGI app alone takes for it."""
    if "wrk" not in rounds[0]:
        return None
    return statistics.median(r["wrk"][0].micros("web") for r in rounds) - pieces["flask_health"]


def keep_figures(config: str, plan: list[Load], rounds: list[Round]) -> None:
    """Latency CDFs and the headline figures of the first (default) gunicorn shape."""
    series = {
        f"{NAMES[gen]}, {load.name}": [x for r in rounds for x in r[gen][i].latencies]
        for gen in rounds[0]
        for i, load in enumerate(plan)
    }
    common.write_samples("publish", series)
    lines = []
    for gen in rounds[0]:
        single = per_round(rounds, gen, lambda s: s[1].rate)
        lines += [
            (f"publish 1 event, req/s, {NAMES[gen]} ({config})", common.spread(single)),
            (f"publish / floor, {NAMES[gen]} ({config})",
             common.spread(per_round(rounds, gen, ratio), "{:.2f}")),
        ]  # fmt: skip
    best = "wrk" if "wrk" in rounds[0] else next(iter(rounds[0]))
    bulk = per_round(rounds, best, lambda s: s[2].rate)
    single = per_round(rounds, best, lambda s: s[1].rate)
    lines += [
        (f"bulk 500, events/s, {NAMES[best]} ({config})", common.spread(bulk)),
        (f"publish vs Routemaster's {ROUTEMASTER:,} req/s (bench.routemaster, 2026-11-25), "
         f"{NAMES[best]} ({config})",
         common.spread([x / ROUTEMASTER for x in single], "{:.1f}x")),
    ]  # fmt: skip
    common.write_headlines("publish", lines)


def write(
    measured: dict[str, list[Round]],
    pieces: dict[str, float],
    plan: list[Load],
    args: argparse.Namespace,
    command: str,
    rerun: int,
    disturbed: float,
) -> None:
    table = []
    for config, rounds in measured.items():
        table += rows(config, plan, rounds)
    first, rounds = next(iter(measured.items()))
    keep_figures(first, plan, rounds)
    gens = " and ".join(NAMES[g] for g in args.generators)
    report = "\n".join([
        "# Publish throughput vs. framework floor", "", f"Machine: {common.machine()}", "",
        f"Command: `{command}`", "",
        f"{args.rounds} rounds of {args.seconds:g} s per load and generator ({gens}), "
        f"interleaved; {args.connections} keep-alive connections (wrk: 2 threads), every "
        "generator on the same cores as gunicorn and valkey. Config = BUSBAR_WEB_WORKERS x "
        "BUSBAR_WEB_THREADS, each on a fresh valkey with one subscriber on both topics (no "
        "worker delivering: events queue); median (min-max) over rounds; publish/floor per "
        "round, each generator against the floor it measured itself; CPU = cores used "
        f"(median); other > {disturbed} means something else disturbed the run ({rerun} "
        f"disturbed round(s) re-run). Client µs = the generator's CPU per request.",
        "",
        "| config | generator | load | rate | p50 ms | p99 ms | publish/floor "
        "| CPU web/redis/client/other | client µs/req |",
        "|---|---|---|---|---|---|---|---|---|", *table, "",
        f"## What the load generator takes ({first})", "",
        *why(rounds), "", *verdict(rounds),
        "## Where a publish's CPU goes", "",
        "Timed in one process, each piece alone (bench/publish_profile.py), on a valkey of "
        "its own after the loads; gunicorn's row is from the wrk floor above "
        f"({first}).", "",
        *publish_profile.rows(pieces, gunicorn(rounds, pieces)), "",
    ])  # fmt: skip
    common.write_report("publish", report)
