"""Whether a hostile transform moves a healthy subscriber's p99 (issue 57's aim of under
1.2x), read so that the machine's own noise falls on both sides alike.

One continuous healthy load (the pair of bench.transforms_cases, 200 events/s); its time
cut in slots of a few seconds that alternate, quiet, beside, beside, quiet, ... In a
slot beside, the case's subscriber is resumed and takes 5 events/s of 10 KB; in a quiet
slot it is paused and nothing is published to it, so whatever it has left waits. The
healthy events are counted by the slot they were sent in, leaving out the first
SETTLE_S of each (what a slot's start leaves running), and a slot in which other jobs of
the host took more than DISTURBED of a core is left out on both sides. The p99 of all
quiet slots' samples against all beside slots' is the figure; the quiet slots split in
two (alternately) give the same ratio with no hostile events at all: the noise it is
read against. The case's subscriber is made anew after its run (its backlog dropped).

Measured for each hostile case and for the neighbour, the same traffic with a transform
that does its job: what 5 events/s of 10 KB cost the healthy pair on these cores
whatever the transform. Windows of a few seconds, not rounds of a case against none
minutes apart: on this 2-core VM the host takes up to 0.4 of a core for seconds at a
time, and a p99 of one window against one other read 0.59x to 6.65x with nothing
hostile between them (docs/transforms.md).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import itertools
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import common
from bench.asyncsink import AsyncSink
from bench.common import Bus
from bench.transforms_cases import (
    HEALTHY,
    HEALTHY_NAMES,
    HEALTHY_TOPIC,
    HOSTILE,
    NEIGHBOUR,
    ORDER,
    TEXT,
    neighbour_subscription,
    publish,
    stamped,
    subscribe,
    subscriptions,
)

QUIET, BESIDE = "quiet", "beside"
SETTLE_S = 0.3  # a slot's first samples are left out: the last slot's work still runs
DISTURBED = 0.15  # cores taken by other jobs during a slot that leave it out
RATE, NEIGHBOUR_RATE = 200.0, 5.0
AIM = 1.2


@dataclass
class Run:
    """One case's slots: the healthy pair's latencies (ms) by side, and the quiet slots'
    split in two for the null ratio."""

    sides: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    halves: tuple[dict[str, list[float]], dict[str, list[float]]] = field(
        default_factory=lambda: (by_name(), by_name())
    )
    kept: dict[str, int] = field(default_factory=lambda: {QUIET: 0, BESIDE: 0})
    dropped: int = 0

    def ratio(self, name: str) -> float:
        return p99(self.sides[BESIDE][name]) / p99(self.sides[QUIET][name])

    def null(self, name: str) -> float:
        a, b = self.halves
        return p99(a[name]) / p99(b[name])


def by_name() -> dict[str, list[float]]:
    return {name: [] for name in HEALTHY}


def p99(values: list[float]) -> float:
    return common.pct(values, 99) if values else float("nan")


def pattern(pairs: int) -> list[str]:
    """quiet, beside, beside, quiet, ...: a drift of the machine within the run falls on
    both sides alike."""
    return [
        side for i in range(pairs) for side in ((QUIET, BESIDE) if i % 2 == 0 else (BESIDE, QUIET))
    ]


def ours(the_bus: Bus, sink: AsyncSink) -> float:
    """CPU seconds so far of the bus's processes, the receiver's and this one (the
    publishing threads): the machine's busy time beyond them is another job's."""
    pids = [the_bus.pids[name] for name in ("web", "redis", "worker")] + [sink.process.pid or 0]
    return sum(common.cpu_seconds(pid) for pid in pids) + time.process_time()


def run(the_bus: Bus, sink: AsyncSink, case: str, pairs: int, slot_s: float) -> Run:
    token, transform = {**HOSTILE, **NEIGHBOUR}[case]
    sides = pattern(pairs)
    healthy = int(RATE * slot_s * len(sides))
    url = f"http://127.0.0.1:{sink.port}"
    with contextlib.closing(the_bus.api(token)) as api:
        api.ok("POST", "/subscriber/pause")
        sink.take()
        common.wait_quiet()
        load = publish(the_bus, HEALTHY_TOPIC, stamped(ORDER), RATE, healthy, 2, [])
        start, marks, theirs = time.time() + 0.05, [], []
        for i, side in enumerate(sides):
            time.sleep(max(0.0, start + i * slot_s - time.time()))
            marks.append(time.time() * 1e3)
            theirs.append(common.busy_seconds() - ours(the_bus, sink))
            api.ok("POST", "/subscriber/" + ("resume" if side == BESIDE else "pause"))
            if side == BESIDE:
                count = int(NEIGHBOUR_RATE * slot_s)
                publish(the_bus, token, stamped({"text": TEXT}), NEIGHBOUR_RATE, count, 1, [])
        time.sleep(max(0.0, start + len(sides) * slot_s - time.time()))
        theirs.append(common.busy_seconds() - ours(the_bus, sink))
        api.ok("POST", "/subscriber/pause")
        load.join()
        records = received(sink, len(HEALTHY) * healthy)
        api.ok("DELETE", "/subscriber/deadletters")
        api.ok("DELETE", "/subscriber")
        api.ok("POST", "/subscription", neighbour_subscription(url, token, transform))
    other = [(b - a) / slot_s for a, b in itertools.pairwise(theirs)]
    return sort(records, marks, sides, other)


def received(sink: AsyncSink, healthy: int, wait_s: float = 30.0) -> list[common.Record]:
    """The receiver's records once every healthy event arrived (or `wait_s` passed)."""
    records: list[common.Record] = []
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        records += sink.take()
        got = sum(len(stamps) for _, path, stamps in records if path.startswith("/h/"))
        if got >= healthy:
            break
        time.sleep(0.1)
    return records


def sort(records: list[common.Record], marks: list[float], sides: list[str],
         other: list[float]) -> Run:  # fmt: skip
    """Each healthy sample to the slot it was sent in, but the first SETTLE_S of a slot
    and the slots other jobs disturbed."""
    found = Run(sides={QUIET: by_name(), BESIDE: by_name()})
    disturbed = {i for i, o in enumerate(other) if o > DISTURBED}
    found.dropped = len(disturbed)
    quiet_seen = {i: n for n, i in enumerate(i for i, s in enumerate(sides) if s == QUIET)}
    for i, side in enumerate(sides):
        if i not in disturbed:
            found.kept[side] += 1
    for at, path, stamps in records:
        _, kind, name = path.split("/")
        if kind != "h":
            continue
        for stamp in stamps:
            sent = stamp[1]
            i = bisect.bisect_right(marks, sent) - 1
            if i < 0 or i in disturbed or sent - marks[i] < SETTLE_S * 1e3:
                continue
            found.sides[sides[i]][name].append(at - sent)
            if sides[i] == QUIET:
                found.halves[quiet_seen[i] % 2][name].append(at - sent)
    return found


def measure(the_bus: Bus, sink: AsyncSink, pairs: int, slot_s: float,
            cases: list[str] | None = None) -> dict[str, Run]:  # fmt: skip
    runs = {}
    for case in cases or [*NEIGHBOUR, *HOSTILE]:
        runs[case] = run(the_bus, sink, case, pairs, slot_s)
        print(f"beside {case}: {headline(runs[case])}", flush=True)
    return runs


def headline(found: Run) -> str:
    return (
        ", ".join(
            f"{name} p99 {p99(found.sides[QUIET][name]):.1f} -> "
            f"{p99(found.sides[BESIDE][name]):.1f}"
            f" ms ({found.ratio(name):.2f}x; null {found.null(name):.2f}x)"
            for name in HEALTHY
        )
        + f"; slots dropped {found.dropped}"
    )


def report(runs: dict[str, Run], pairs: int, slot_s: float) -> list[str]:
    names = list(HEALTHY)
    rows = []
    for case, found in runs.items():
        cells = [case, f"{found.kept[QUIET]} / {found.kept[BESIDE]}"]
        for name in names:
            quiet, beside = found.sides[QUIET][name], found.sides[BESIDE][name]
            cells += [
                f"{statistics.median(quiet):.1f} / {statistics.median(beside):.1f}",
                f"{p99(quiet):.1f} / {p99(beside):.1f}",
                f"**{found.ratio(name):.2f}x**", f"{found.null(name):.2f}x",
            ]  # fmt: skip
        rows.append("| " + " | ".join(cells) + " |")
    worst = {case: max(found.ratio(n) for n in names) for case, found in runs.items()}
    hostile = [case for case in HOSTILE if case in runs]
    met = [case for case in hostile if worst[case] < AIM]
    neighbour = [f"{worst[case]:.2f}x" for case in NEIGHBOUR if case in runs]
    header = " | ".join(
        f"{HEALTHY_NAMES[n]} p50 quiet / beside | p99 quiet / beside | p99 ratio | null"
        for n in names
    )
    return [
        "## A healthy subscriber's p99 beside a hostile transform, in alternating slots",
        "",
        f"One healthy load of {RATE:g} events/s for {2 * pairs} slots of {slot_s:g} s, "
        "alternating quiet, beside, beside, quiet; beside: the case's subscriber resumed "
        f"and taking {NEIGHBOUR_RATE:g} events/s of 10 KB, quiet: paused and sent nothing. "
        f"Healthy events by the slot they were sent in, less each slot's first {SETTLE_S:g} s "
        f"and any slot in which other jobs took over {DISTURBED} of a core (slots kept: "
        "quiet / beside). p99 ratio: all beside slots' samples against all quiet ones' "
        f"(the aim: under {AIM}x); null: the quiet slots split in two, one half against "
        "the other, the same reading with nothing hostile (its distance from 1.00 is what "
        "this machine can resolve). The neighbour is the same traffic with a transform "
        "that does its job.",
        "",
        f"| case | slots kept | {header} |",
        "|---" * (2 + 4 * len(names)) + "|",
        *rows,
        "",
        f"Both healthy subscribers' p99 within {AIM}x: met beside "
        f"{', '.join(met) or 'none'}; NOT met beside "
        f"{', '.join(c for c in hostile if c not in met) or 'none'}. Beside the neighbour: "
        f"{', '.join(neighbour) or 'not measured'}.",
        "",
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """This part alone, on a bus of its own: `--cases` picks cases by a part of their
    name (comma-separated)."""
    parser = argparse.ArgumentParser(prog="bench.transforms_beside", description=__doc__)
    parser.add_argument("--cases", default="", help="parts of case names, comma-separated")
    parser.add_argument("--pairs", type=int, default=16)
    parser.add_argument("--slot", type=float, default=3.0, help="seconds")
    args = parser.parse_args(argv)
    wanted = [p for p in args.cases.split(",") if p]
    cases = [c for c in [*NEIGHBOUR, *HOSTILE] if not wanted or any(p in c for p in wanted)]
    sink = AsyncSink([("/", 0.0)])
    try:
        with tempfile.TemporaryDirectory(prefix="busbar-bench-") as work, common.web_bus(
            Path(work), env={"BUSBAR_REDIS_MAX_MEM": str(1 << 30)}
        ) as the_bus, common.worker(the_bus):  # fmt: skip
            the_bus.client("pub").close()
            subscribe(the_bus, subscriptions(f"http://127.0.0.1:{sink.port}"))
            runs = measure(the_bus, sink, args.pairs, args.slot, cases)
    finally:
        sink.stop()
    command = (
        ".venv/bin/python -m bench.transforms_beside"
        + (" " + " ".join(argv or sys.argv[1:])).rstrip()
    )
    common.write_report("transforms_beside", "\n".join([
        "# Transforms: a healthy subscriber's p99 beside hostile ones, in alternating slots",
        "", f"`{command}` from the repository root; {common.machine()}.", "",
        "Redis, `busbar web` and one `busbar worker` (defaults; transforms at 50 ms, depth "
        "300, 256 KiB), subscribers on one asyncio receiver process answering at once; "
        "every subscription `timeout: 0`. The same part of `bench.transforms_delivery`, "
        "alone.", "",
        *report(runs, args.pairs, args.slot),
    ]))  # fmt: skip


if __name__ == "__main__":
    main()
