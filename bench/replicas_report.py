"""The markdown of bench.replicas (bench/results/replicas.md): its own module, so the
benchmark's logic stays readable next to two wide tables."""

from __future__ import annotations

from typing import Any

from bench import common

SETTINGS = {"off": "0", "on (1 replica)": "1"}  # BUSBAR_REDIS_MIN_REPLICAS
Rows = dict[str, list[dict[str, Any]]]  # setting: one row per round


def value(row: dict[str, Any], field: str) -> float:
    """row["drain"]["rate"] for field "drain.rate"."""
    for part in field.split("."):
        row = row[part]
    return float(row)  # type: ignore[arg-type]  # the last part is a number


def ratio(rows: Rows, field: str) -> str:
    """On over off, round by round (each pair ran on the same servers, a minute apart)."""
    on, off = rows["on (1 replica)"], rows["off"]
    pairs = zip(on, off, strict=True)
    return common.spread([value(a, field) / value(b, field) for a, b in pairs], "{:.2f}")


def cells(runs: list[dict[str, Any]], fields: dict[str, str]) -> str:
    """Median (min-max) over the rounds of each field, as table cells."""
    return " | ".join(common.spread([value(r, f) for r in runs], fmt) for f, fmt in fields.items())


PUBLISH = {"rate": "{:,.0f}", "p50": "{:.2f}", "p99": "{:.2f}", "waits": "{:.2f}",
           "web_us": "{:,.0f}", "redis_us": "{:,.0f}"}  # fmt: skip
DRAIN = {"drain.rate": "{:,.0f}", "drain.waits": "{:.2f}", "drain.worker_us": "{:,.0f}",
         "drain.redis_us": "{:,.0f}"}  # fmt: skip


def report(command: str, threads: int, sizes: tuple[int, int], runs: dict[str, Rows]) -> str:
    return "\n".join([
        "# BUSBAR_REDIS_MIN_REPLICAS: its cost",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        "Two layouts, every server on this machine: one Redis with one replica, and a "
        "Redis Cluster of 3 masters with one replica each (6 shards); `busbar web` with "
        "its defaults. Each layout's servers are started once; on them the setting off and "
        "on take turns, round by round. WAITs: the WAIT commands every master ran. Redis "
        "CPU: every server's, masters and replicas. Median (min-max).",
        "",
        f"Publish: {threads} threads x {sizes[0]:,} single-event publishes on keep-alive "
        "connections; CPU per publish.",
        "",
        "| layout | BUSBAR_REDIS_MIN_REPLICAS | req/s | p50 ms | p99 ms | WAITs per publish "
        "| web CPU µs | Redis CPU µs |",
        "|---|---|---|---|---|---|---|---|",
        *[f"| {layout} | {label} | {cells(v, PUBLISH)} |"
          for layout, rows in runs.items() for label, v in rows.items()],
        "",
        f"Delivery: a backlog of {sizes[1]:,} events drained by one `busbar worker` for one "
        "subscriber with `max: 1, timeout: 0` (one settle per event, the worst case). "
        "Events/s from first to last receipt; worker CPU from its being ready to the last "
        "receipt; WAITs and Redis CPU over the backlog's publishes, the worker's start, the "
        "drain and its stop; all per drained event.",
        "",
        "| layout | BUSBAR_REDIS_MIN_REPLICAS | events/s | WAITs per event | worker CPU µs "
        "| Redis CPU µs |",
        "|---|---|---|---|---|---|",
        *[f"| {layout} | {label} | {cells(v, DRAIN)} |"
          for layout, rows in runs.items() for label, v in rows.items()],
        "",
        "On against off, round by round:",
        "",
        *[f"- {layout}: publish {ratio(rows, 'rate')}x the rate; serial drain "
          f"{ratio(rows, 'drain.rate')}x."
          for layout, rows in runs.items()],
        "",
    ])  # fmt: skip
