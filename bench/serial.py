"""The ceiling of one subscriber with `max: 1, timeout: 0`: its deliveries are serial
(one in flight per subscriber), so its rate is one over the delivery cycle. A backlog is
queued with no worker running, then one `busbar worker` drains it; the rate is events
over first to last receipt, and the round trips are the Redis commands the worker sent
per delivered event. The baselines are the same drain by workers run from other commits
of busbar (git worktrees under var/), in the same run, against the same Redis and web,
the order turning round each round: the thread engine the asyncio one replaced
(bench.engines.BASELINE) and the code before take+begin (issue 16). Each runs with its
defaults: with one subscriber of max 1, one delivery is in flight whatever the engine's
concurrency.

    .venv/bin/python -m bench.serial [--quick] [--baseline REV]...
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench import common
from bench.sink import Sink

COMMAND = ".venv/bin/python -m bench.serial"
ROOT = Path(__file__).resolve().parent.parent
# before the take+begin script and the ack that begins the next batch (issue 16)
BASELINE = "2b5435a"
# bench.engines.BASELINE is the other default; it is imported in main(), as bench.engines
# imports checkout() from here
ENV = {"BUSBAR_REDIS_MAX_MEM": str(1 << 30)}


def checkout(rev: str) -> Path:
    """A worktree of `rev` under var/, made once and reused."""
    path = ROOT / "var" / f"bench-baseline-{rev}"
    if not path.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(path), rev],
            check=True, capture_output=True,
        )  # fmt: skip
    return path


def commands(the_bus: common.Bus) -> int:
    """Scripts and blocking takes Redis has run so far: a worker's round trips, near
    enough (commands a script runs count in Redis's totals too, so those are no use)."""
    with contextlib.closing(the_bus.redis()) as client:
        stats = client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "blmove"))


def subscribe(the_bus: common.Bus, sink: Sink) -> None:
    """The publisher `pub`, and the subscriber `serial` (max 1, timeout 0) into `sink`."""
    with contextlib.closing(the_bus.api()) as root:
        root.ok("POST", "/api_tokens", {"name": "pub", "token": "pub"})
        root.ok("POST", "/api_tokens", {"name": "serial", "token": "serial"})
    with contextlib.closing(the_bus.api("serial")) as api:
        body = {"topics": ["serial"], "callback": f"http://127.0.0.1:{sink.port}/s",
                "max": 1, "timeout": 0}  # fmt: skip
        api.ok("POST", "/subscription", body)


def drain(the_bus: common.Bus, sink: Sink, count: int, code: Path | None) -> dict[str, Any]:
    """Queue `count` events, then time a worker (run from `code`) delivering them."""
    sink.take()
    start = sink.received
    with contextlib.closing(the_bus.api("pub")) as pub:
        for n in range(0, count, 500):
            events = [{"type": "create", "url": f"https://o.test/{i}"}
                      for i in range(n, min(n + 500, count))]  # fmt: skip
            pub.ok("POST", "/topics/serial", events)
    common.wait_quiet()
    before = commands(the_bus)
    with common.worker(the_bus, code) as process:
        cpu = common.cpu_seconds(process.pid)
        complete = sink.wait_for(start + count, 300)
        cpu = common.cpu_seconds(process.pid) - cpu
    used = commands(the_bus) - before
    arrivals = sorted(at for at, _, _ in sink.take())
    seconds = (arrivals[-1] - arrivals[0]) / 1000 if len(arrivals) > 1 else 0.0
    return {
        "complete": complete and len(arrivals) == count,
        "rate": (len(arrivals) - 1) / seconds if seconds else 0.0,
        "commands": used / count,
        "worker_us": cpu / count * 1e6,  # from ready to the last receipt
    }


def main(argv: list[str] | None = None) -> None:
    from bench import engines

    parser = argparse.ArgumentParser(prog="bench.serial", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short run, for a smoke check")
    parser.add_argument(
        "--baseline", action="append", help="commit to compare with (repeatable; default: "
        f"{engines.BASELINE}, the thread engine, and {BASELINE})",
    )  # fmt: skip
    args = parser.parse_args(argv)
    baselines = args.baseline or [engines.BASELINE, BASELINE]
    count, rounds = (2_000, 1) if args.quick else (10_000, 3)
    ours = engines.tree()
    variants = {f"baseline {rev}": checkout(rev) for rev in baselines} | {ours: None}
    rows: dict[str, list[dict[str, Any]]] = {}
    sink = Sink()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="busbar-bench-") as work,
            common.web_bus(Path(work), env=ENV) as the_bus,
        ):
            subscribe(the_bus, sink)
            for r in range(rounds):  # the order turns round, so drift on the box hits all
                for label, code in list(variants.items())[:: 1 if r % 2 == 0 else -1]:
                    rows.setdefault(label, []).append(drain(the_bus, sink, count, code))
                    print(f"{label} round {r}: {rows[label][-1]}", flush=True)
    finally:
        sink.stop()
    if not all(r["complete"] for runs in rows.values() for r in runs):
        raise RuntimeError("a drain did not deliver every event within 300 s")
    command = COMMAND + (" --quick" if args.quick else "")
    common.write_report("serial", report(command, count, rows, ours, baselines))
    first = f"baseline {baselines[0]}"
    common.write_headlines("serial", [
        ("max 1 subscriber ceiling, events/s", common.spread([r["rate"] for r in rows[ours]])),
        *[(f"against baseline {rev}", ratio(rows, ours, f"baseline {rev}") + "x")
          for rev in baselines],
        ("round trips per event",
         common.spread([r["commands"] for r in rows[ours]], "{:.2f}") + f" ({first} "
         + common.spread([r["commands"] for r in rows[first]], "{:.2f}") + ")"),
    ])  # fmt: skip


def ratio(rows: dict[str, list[dict[str, Any]]], ours: str, base: str) -> str:
    """This tree's rate over a baseline's, round by round: median (min-max)."""
    pairs = zip(rows[ours], rows[base], strict=True)
    return common.spread([o["rate"] / b["rate"] for o, b in pairs], "{:.2f}")


def report(
    command: str, count: int, rows: dict[str, list[dict[str, Any]]], ours: str, baselines: list[str]
) -> str:
    revs = " and ".join(baselines)
    return "\n".join([
        "# One subscriber with max 1, timeout 0: its ceiling",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        f"A backlog of {count:,} events for one subscriber (`max: 1`, `timeout: 0`, a local "
        "subscriber answering at once), drained by one `busbar worker` with defaults; "
        f"the baseline workers run from commits {revs}, the same web and Redis, "
        "the order turning round each round. Round trips: the scripts and blocking takes "
        "Redis ran during the drain (the worker's start and stop, its scheduler and "
        "heartbeat included), per event. Worker CPU: from ready to the last receipt, per "
        "event. Median (min-max).",
        "",
        "| worker | events/s | round trips per event | worker CPU µs per event |",
        "|---|---|---|---|",
        *[
            f"| {label} | {common.spread([r['rate'] for r in runs])} "
            f"| {common.spread([r['commands'] for r in runs], '{:.2f}')} "
            f"| {common.spread([r['worker_us'] for r in runs])} |"
            for label, runs in rows.items()
        ],
        "",
        *[f"This tree against baseline {rev}: {ratio(rows, ours, f'baseline {rev}')}x the rate."
          for rev in baselines],
        "",
    ])  # fmt: skip


if __name__ == "__main__":
    main()
