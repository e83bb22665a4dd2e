"""The ceiling of one subscriber with `max: 1, timeout: 0`: its deliveries are serial
(one in flight per subscriber), so its rate is one over the delivery cycle. A backlog is
queued with no worker running, then one `busbar worker` drains it; the rate is events
over first to last receipt, and the round trips are the Redis commands the worker sent
per delivered event. The baseline is the same drain by a worker run from another commit
of busbar (a git worktree under var/), in the same run, against the same Redis and web.

    .venv/bin/python -m bench.serial [--quick] [--baseline REV]
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
    with common.worker(the_bus, code):
        complete = sink.wait_for(start + count, 300)
    used = commands(the_bus) - before
    arrivals = sorted(at for at, _, _ in sink.take())
    seconds = (arrivals[-1] - arrivals[0]) / 1000 if len(arrivals) > 1 else 0.0
    return {
        "complete": complete and len(arrivals) == count,
        "rate": (len(arrivals) - 1) / seconds if seconds else 0.0,
        "commands": used / count,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.serial", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short run, for a smoke check")
    parser.add_argument("--baseline", default=BASELINE, help="commit to compare with")
    args = parser.parse_args(argv)
    count, rounds = (2_000, 1) if args.quick else (10_000, 3)
    variants = {f"baseline {args.baseline}": checkout(args.baseline), "this tree": None}
    rows: dict[str, list[dict[str, Any]]] = {}
    sink = Sink()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="busbar-bench-") as work,
            common.web_bus(Path(work), **ENV) as the_bus,
        ):
            with contextlib.closing(the_bus.api()) as root:
                root.ok("POST", "/api_tokens", {"name": "pub", "token": "pub"})
                root.ok("POST", "/api_tokens", {"name": "serial", "token": "serial"})
            with contextlib.closing(the_bus.api("serial")) as api:
                body = {"topics": ["serial"], "callback": f"http://127.0.0.1:{sink.port}/s",
                        "max": 1, "timeout": 0}  # fmt: skip
                api.ok("POST", "/subscription", body)
            for r in range(rounds):  # alternating, so drift on the machine hits both
                for label, code in variants.items():
                    rows.setdefault(label, []).append(drain(the_bus, sink, count, code))
                    print(f"{label} round {r}: {rows[label][-1]}", flush=True)
    finally:
        sink.stop()
    if not all(r["complete"] for runs in rows.values() for r in runs):
        raise RuntimeError("a drain did not deliver every event within 300 s")
    base, ours = rows[f"baseline {args.baseline}"], rows["this tree"]
    ratios = [o["rate"] / b["rate"] for o, b in zip(ours, base, strict=True)]
    command = COMMAND + (" --quick" if args.quick else "")
    lines = [
        "# One subscriber with max 1, timeout 0: its ceiling",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        f"A backlog of {count:,} events for one subscriber (`max: 1`, `timeout: 0`, a local "
        "subscriber answering at once), drained by one `busbar worker` with defaults; "
        f"the baseline worker runs from commit {args.baseline}, the same web and Redis, "
        "rounds alternating. Round trips: the scripts and blocking takes Redis ran during the "
        "drain (the worker's start and stop, its scheduler and heartbeat included), per "
        "event. "
        "Median (min-max).",
        "",
        "| worker | events/s | round trips per event |",
        "|---|---|---|",
        *[
            f"| {label} | {common.spread([r['rate'] for r in runs])} "
            f"| {common.spread([r['commands'] for r in runs], '{:.2f}')} |"
            for label, runs in rows.items()
        ],
        "",
        f"This tree against the baseline: {common.spread(ratios, '{:.2f}')}x the rate.",
        "",
    ]
    common.write_report("serial", "\n".join(lines))
    common.write_headlines("serial", [
        ("max 1 subscriber ceiling, events/s", common.spread([r["rate"] for r in ours])),
        ("against the baseline commit", common.spread(ratios, "{:.2f}") + "x"),
        ("round trips per event",
         common.spread([r["commands"] for r in ours], "{:.2f}") + " (baseline "
         + common.spread([r["commands"] for r in base], "{:.2f}") + ")"),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
