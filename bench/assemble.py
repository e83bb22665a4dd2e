"""BENCHMARKS.md from the results folder: a summary of headline figures, the list of
runs (command, outcome, time), then each benchmark's own report with its latency plot.
The per-benchmark reports stay the authority; this only puts them in one place and says
which of them this run produced (a failed step's older report is marked as such).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from dataclasses import dataclass
from pathlib import Path

from bench import common

SECTIONS = {  # results name: title
    "publish": "Publish, single and bulk, vs the framework floor (issue 16: wrk and Python load)",
    "delivery": "End-to-end delivery: 1, 50 and 500 subscribers",
    "jobqueue": "Job queue vs RQ",
    "memory": "Redis memory per queued event",
    "routes": "Routes: coalescing, priority under backlog, starvation (issue 5)",
    "filters": "Content filters: 100 filtered subscribers, a backtracking pattern (issue 38)",
    "transforms_delivery": "Transforms at delivery: a fan-out to 10 transforming subscribers, "
    "hostile transforms beside healthy subscribers (issue 57)",
    "schemas": "Event schemas: a 10-property JSON Schema checked at publish (issue 38)",
    "mtls": "Callbacks that authenticate the bus: mutual TLS, a JWT per push, OAuth2 (issue 39)",
    "spark": "Spark ingest of the delivery log",
    "scripts": "Longest single Lua script at the documented maxima (issue 11)",
    "cluster": "One Redis against a 3-master Redis Cluster (issue 13)",
    "fanout": "Fan-out: 1,000 subscribers x 50 ms and 10,000 x 1 s, asyncio engine against "
    "thread engine (a waiting delivery costs a socket, not a thread)",
    "serial": "One subscriber with max 1: its ceiling against the previous code (issue 16)",
    "isolation": "Isolation: 5 healthy subscribers beside 300 black holes, asyncio engine "
    "against thread engine",
    "isolation3000": "Isolation: 5 healthy subscribers beside 3,000 black holes",
    "policy": "Failure policy: a dead endpoint and a 503 with Retry-After, against the health "
    "curve (issue 22)",
    "replicas": "Durable writes (BUSBAR_REDIS_MIN_REPLICAS): their cost on one Redis and a cluster",
    "origin": "One origin, 1,000 subscribers: connections per origin bounded, against the "
    "engine before (issue 37)",
    "keys": "Ordering keys: deliveries in flight per subscriber, against concurrency 1 (issue 37)",
    "flaky": "A subscriber that fails now and then: the lone retry against the 1 s first delay "
    "(issue 37)",
    "blip": "A 1.5 s outage at concurrency 1 to 64: the circuit on an outage, against the count "
    "alone (issue 53)",
    "upkeep": "A bus at rest: the worker's and Redis's upkeep beside 10,000 idle subscribers",
    "listing": "GET /subscriptions beside 10,000 subscribers: a script a shard, and a page",
    "stall": "Publishes beside a long answer (GET /subscriptions, /metrics): turns, not a "
    "held process",
    "destinations": "Destinations: events/s into NATS JetStream, RabbitMQ and Amazon SQS "
    "(moto's), against each client's loop, and a broker killed (issue 58)",
}


@dataclass(frozen=True)
class Step:
    """What the runner did for one benchmark."""

    name: str
    command: str
    status: str  # "ok", "exit N", "timeout", "not run"
    seconds: float
    finished: str = ""  # UTC, when it ran: an earlier run's step says so in Runs


def record(results: Path, step: Step) -> None:
    """Keep what a step did, so a later `--only` run shows it with its own date."""
    path = results / f"{step.name}.run.json"
    path.write_text(json.dumps(dataclasses.asdict(step), indent=1) + "\n")


def recorded(results: Path, step: Step) -> Step:
    """A step this run did not run: as the last run that did recorded it, if any."""
    path = results / f"{step.name}.run.json"
    if step.status != "not run" or not path.exists():
        return step
    return Step(**json.loads(path.read_text()))


def demote(markdown: str) -> list[str]:
    """A report's headings one level down, under its section; its own title dropped."""
    lines = markdown.strip().splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return ["#" + line if line.startswith("#") else line for line in lines]


def headlines(results: Path, steps: list[Step]) -> list[str]:
    rows = ["| benchmark | figure | median (min-max) |", "|---|---|---|"]
    for step in steps:
        path = results / f"{step.name}.headlines.json"
        if step.status == "ok" and path.exists():
            for figure, value in json.loads(path.read_text()):
                rows.append(f"| {step.name} | {figure} | {value} |")
        else:
            rows.append(f"| {step.name} | {step.status} in this run | |")
    return rows


def section(results: Path, target: Path, step: Step) -> list[str]:
    lines = ["", f"## {SECTIONS.get(step.name, step.name)}", ""]
    report = results / f"{step.name}.md"
    if step.status != "ok":
        lines += [f"**{step.status} in this run** (`{step.command}`; log in var/bench-logs).", ""]
        if not report.exists():
            return lines
        when = datetime.datetime.fromtimestamp(report.stat().st_mtime, datetime.UTC)
        lines += [f"The report below is from an earlier run ({when:%Y-%m-%d %H:%M} UTC).", ""]
    if report.exists():
        lines += demote(report.read_text())
    plot = results / f"{step.name}-latency.png"
    if plot.exists():
        link = os.path.relpath(plot, target.parent)
        lines += ["", f"![{step.name} latency distributions]({link})"]
    return lines


def assemble(
    results: Path, target: Path, steps: list[Step], quick: bool, command: str, started: str = ""
) -> str:
    """Write `target` and return its text. `started`: when this run began (UTC, ISO);
    a step it did not run comes from the last run that did (its record), said as such."""
    steps = [recorded(results, s) for s in steps]
    failed = [s.name for s in steps if s.status != "ok"]
    merged = [s.name for s in steps if s.finished and s.finished < started]
    took = sum(s.seconds for s in steps if s.name not in merged) / 60  # this run's only
    lines = ["# busbar benchmarks", ""]
    if quick:
        lines += [
            "> **Smoke run (`--quick`)**: short durations, one round each. These figures only "
            "show that every benchmark runs; they are not measurements. Run `make bench` "
            "for those.",
            "",
        ]
    lines += [
        f"Produced by `{command}` from the repository root (`make bench` installs the "
        f"`bench` extra and runs it) in {took:.0f} min; {common.machine()}. Each benchmark "
        "ran as its own process, one after another, on the same shared machine, so every "
        "figure is a median over rounds with min-max in parentheses, and ratios are taken "
        "within a round (both sides measured back to back) before being summarised. "
        "Latency plots are CDFs on a log axis, pooled over rounds. Each section names the "
        "command that reproduces it alone.",
        "",
        f"Failed or skipped in this run: {', '.join(failed) if failed else 'none'}.",
        "",
    ]
    if merged:
        lines += [
            f"Not run by this command, shown as their last run left them (Runs says when): "
            f"{', '.join(merged)}.",
            "",
        ]
    lines += [
        "## Summary",
        "",
        *headlines(results, steps),
        "",
        "## Runs",
        "",
        "| benchmark | command | outcome | minutes | finished (UTC) |",
        "|---|---|---|---|---|",
        *[
            f"| {s.name} | `{s.command}` | {s.status} | {s.seconds / 60:.1f} "
            f"| {s.finished[:16].replace('T', ' ')} |"
            for s in steps
        ],
    ]
    for step in steps:
        lines += section(results, target, step)
    text = "\n".join(lines) + "\n"
    target.write_text(text)
    return text
