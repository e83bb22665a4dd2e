"""What `GET /subscriptions` costs as root beside many subscribers, this tree's web against
a baseline's on the same Redis and the same subscribers, in the same run; and a page of
100 (`?limit=100`, what the console asks for).

Each size is measured with nothing queued, then with three events queued for every
subscriber (one batch each, `max: 1`, no worker runs), so that the listing counts lanes
that hold something. The two webs take turns, the order turning round each round; each
call's CPU is the web's (master and its workers) and Redis's over that call. Both answers
are compared entry by entry (by token): the same subscribers with the same figures,
whatever the order.

    .venv/bin/python -m bench.listing                      # against BASELINE
    .venv/bin/python -m bench.listing --baseline <rev> --rounds 5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench import common, engines
from bench.measure import cpu_seconds
from bench.serial import checkout
from dev import redis_server
from spec.integration.processes import answers, running, wait_until

COMMAND = ".venv/bin/python -m bench.listing"
BASELINE = "e4ca59a"  # a script call a subscriber's pipelined commands, no pages
CALLS = 3  # listings a web answers a round, the median kept
STATES = ("idle", "queued")  # each size measured with nothing queued, then three events each


def subscribe(the_bus: common.Bus, first: int, count: int) -> None:
    """`count` more subscribers to topic `rest`, nothing queued for them yet."""
    engines.subscribe_many(the_bus, [
        (f"s{i:05}", {"callback": f"http://127.0.0.1:9/{i}", "topics": ["rest"], "max": 1})
        for i in range(first, first + count)
    ])  # fmt: skip


def queue_three(the_bus: common.Bus, tag: int) -> None:
    """Three events for every subscriber (a batch each: `max: 1`, no worker)."""
    with contextlib.closing(the_bus.api("pub")) as pub:
        events = [{"type": "create", "url": f"https://o.test/{tag}/{n}"} for n in range(3)]
        pub.ok("POST", "/topics/rest", events)


def listed(the_bus: common.Bus, port: int, pid: int, path: str) -> dict[str, float | bytes]:
    """One listing as root: its wall time, the web's and Redis's CPU, and its body."""
    api = common.Api(port, the_bus.root)
    with contextlib.closing(api):
        web, db, started = cpu_seconds(pid), cpu_seconds(the_bus.pids["redis"]), time.perf_counter()
        status, body = api.call("GET", path)
        took = time.perf_counter() - started
        web, db = cpu_seconds(pid) - web, cpu_seconds(the_bus.pids["redis"]) - db
    assert status == 200, (status, body[:200])
    return {"ms": 1000 * took, "web_ms": 1000 * web, "redis_ms": 1000 * db, "body": body}


def same(ours: bytes, theirs: bytes) -> bool:
    """The same entries (by token) with the same figures."""
    mine = {e["subscriber"]: e for e in json.loads(ours)}
    base = {e["subscriber"]: e for e in json.loads(theirs)}
    return mine == base


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=BASELINE, help="the commit to set against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--subscribers", default="1000,10000", help="bus sizes, in order")
    parser.add_argument("--quick", action="store_true", help="1 round, 2,000 at most")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.subscribers.split(",")]
    rounds = 1 if args.quick else args.rounds
    if args.quick:
        sizes = [min(n, 2_000) for n in sizes]
    ours, base = engines.tree(), f"baseline {args.baseline}"
    rows: dict[str, dict[str, list[dict[str, float]]]] = {}
    agree: list[bool] = []
    with (
        tempfile.TemporaryDirectory(prefix="busbar-bench-") as work,
        common.web_bus(Path(work)) as the_bus,
    ):
        port = redis_server.free_port()
        env = {**the_bus.env, "PORT": str(port)}
        code = checkout(args.baseline)
        with running(["web"], env, cwd=code, log=Path(work) / "web-baseline.log") as other:
            wait_until(lambda: answers(f"http://127.0.0.1:{port}/health"), what="baseline web")
            webs = {ours: (the_bus.port, the_bus.pids["web"]), base: (port, other.pid)}
            the_bus.client("pub").close()
            done = 0
            for size in sizes:
                subscribe(the_bus, done, size - done)
                done = size
                for state in STATES:
                    if state == "queued":
                        queue_three(the_bus, size)
                    found = rows.setdefault(
                        f"{size:,}, {state}", {label: [] for label in [*webs, "page"]}
                    )
                    agree += measure(the_bus, webs, rounds, found, f"{size} {state}")
    command = COMMAND + (" --quick" if args.quick else "")
    common.write_report("listing", report(command, rows, ours, base, all(agree)))
    largest = rows[f"{sizes[-1]:,}, queued"]
    common.write_headlines("listing", [
        (f"GET /subscriptions beside {sizes[-1]:,} subscribers, 3 events each, web CPU ms",
         common.spread([r["web_ms"] for r in largest[ours]], "{:.0f}") + f" ({base}: "
         + common.spread([r["web_ms"] for r in largest[base]], "{:.0f}") + ")"),
        (f"a page of 100 beside {sizes[-1]:,} subscribers, web CPU ms a call",
         common.spread([r["web_ms"] for r in largest["page"]], "{:.0f}")),
    ])  # fmt: skip


def measure(
    the_bus: common.Bus, webs: dict[str, tuple[int, int]], rounds: int,
    found: dict[str, list[dict[str, float]]], what: str,
) -> list[bool]:  # fmt: skip
    """`rounds` rounds of the webs' listings, taking turns, then a page of ours; whether
    each round's two answers agreed."""
    ours, base = list(webs)
    agree = []
    for r in range(rounds):
        bodies = {}
        for label, (port, pid) in list(webs.items())[:: 1 if r % 2 == 0 else -1]:
            calls = [listed(the_bus, port, pid, "/subscriptions") for _ in range(CALLS)]
            found[label].append(median(calls))
            bodies[label] = calls[-1]["body"]
            print(f"{what}, {label}, round {r}: {found[label][-1]}", flush=True)
        pages = [listed(the_bus, *webs[ours], "/subscriptions?limit=100") for _ in range(CALLS)]
        found["page"].append(median(pages))
        agree.append(same(bodies[ours], bodies[base]))  # type: ignore[arg-type]
    return agree


def median(calls: list[dict[str, float | bytes]]) -> dict[str, float]:
    keys = ("ms", "web_ms", "redis_ms")
    found = {k: statistics.median(float(c[k]) for c in calls) for k in keys}  # type: ignore[arg-type]
    return {**found, "bytes": float(len(calls[-1]["body"]))}  # type: ignore[arg-type]


def report(
    command: str, rows: dict[str, dict[str, list[dict[str, float]]]], ours: str, base: str,
    agree: bool,
) -> str:  # fmt: skip
    lines = [
        "# GET /subscriptions beside many subscribers",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        "One Redis, this tree's `busbar web` and the baseline's (a worktree of its commit) "
        "on the same store, no worker; each size measured with nothing queued (idle), then "
        "with three events queued for every subscriber (`max: 1`: a batch each). "
        f"A round: each web answers {CALLS} listings as root (the median kept), the two "
        "taking turns, then this tree's web answers a page of 100 (`?limit=100`, the "
        "console's). CPU: the web process (master and workers) and Redis, over the call. "
        "Median (min-max) over the rounds.",
        "",
        "| subscribers, queue | web | answer | took, ms | web CPU, ms | Redis CPU, ms |",
        "|---|---|---|---|---|---|",
    ]
    for size, found in rows.items():
        for label, runs in found.items():
            name = f"{ours}, ?limit=100" if label == "page" else label
            size_kb = statistics.median(r["bytes"] for r in runs) / 1000
            lines.append(
                f"| {size} | {name} | {size_kb:,.0f} kB "
                f"| {common.spread([r['ms'] for r in runs], '{:.0f}')} "
                f"| {common.spread([r['web_ms'] for r in runs], '{:.0f}')} "
                f"| {common.spread([r['redis_ms'] for r in runs], '{:.0f}')} |"
            )
    lines += [
        "",
        f"The two webs' answers had the same entries and figures: {'yes' if agree else 'NO'}.",
        "",
    ]
    for size, found in rows.items():
        pairs = list(zip(found[ours], found[base], strict=True))
        ratio = common.spread([o["web_ms"] / max(b["web_ms"], 1) for o, b in pairs], "{:.2f}")
        lines.append(f"{size}: this tree's web {ratio}x the baseline's CPU a listing.")
    return "\n".join([*lines, ""])


if __name__ == "__main__":
    main()
