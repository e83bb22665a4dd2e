"""Where the time goes (issue 54, item 4): py-spy on the worker under bench.fanout and
bench.keys, and on web under bench.publish; a flame graph of each into docs/img/, the
samples into var/profile/, the largest costs printed (`make profile`, a few minutes).

Each profile is one of those benchmarks' own loads, set up by their own helpers on real
processes, with py-spy attached (bench/profile_spy.py says how, and what a sample is)
only while the measured rounds run: setup (11,000 subscribers for the fan-out) and a
first round, which opens the worker's connections or warms web's, are left out. What
the benchmarks measure under the profiler is printed with it, and bench.publish's load
runs once without py-spy as well, for what sampling costs (each sample stops the process
a moment). Then the samples by part of the work (bench/profile_parts.py), by function
and by file, and a flame graph (bench/profile_flame.py).

- fanout: bench.fanout's A (1,000 subscribers answering in 50 ms), then its B (10,000
  answering in 1 s), FULL.a_rounds and .b_rounds rounds, paced as bench.fanout paces
  them (wait_quiet between rounds), on one worker of this tree and no baseline.
- keys: bench.keys's `concurrency 64` case (4,000 events over 400 urls, a subscriber
  answering in 50 ms), FULL.keys_rounds rounds.
- publish: bench.publish's single-event publish under wrk (8 keep-alive connections)
  against gevent:2 (the default web) for FULL.publish_s seconds, both web processes.

    .venv/bin/python -m bench.profile [--quick] [--only fanout,keys,publish] [--rate N]

Needs ptrace rights over the busbar processes (root, or kernel.yama.ptrace_scope 0):
py-spy attaches to them by pid. --quick writes its flame graphs under var/profile/.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from bench import (
    common,
    engines,
    fanout,
    keys,
    profile_flame,
    profile_parts,
    profile_spy,
    publish,
    wrk,
)
from bench.asyncsink import AsyncSink
from spec.integration.processes import children_of, wait_until

ROOT = Path(__file__).resolve().parent.parent
IMAGES, SAMPLES = ROOT / "docs" / "img", ROOT / "var" / "profile"
RATE = 100  # samples a second (py-spy's default): each stops the process


class Sizes(NamedTuple):
    a_rounds: int  # bench.fanout's A, profiled
    b_rounds: int  # and its B
    keys_rounds: int
    publish_s: float


FULL, QUICK = Sizes(20, 3, 8, 20.0), Sizes(2, 1, 1, 3.0)


class Run:
    """One profile's settings and where its files go: `name`.raw (the samples), .log
    (py-spy's) and .txt (the largest costs) under SAMPLES, profile-`name`.svg under
    IMAGES; a --quick run keeps all of them under SAMPLES/quick, so a smoke run replaces
    neither the pictures the docs show nor the samples they were drawn from."""

    def __init__(self, name: str, args: argparse.Namespace) -> None:
        self.name, self.args, self.notes = name, args, list[str]()
        self.window: profile_spy.Window | None = None
        self.sizes = QUICK if args.quick else FULL
        folder = SAMPLES / "quick" if args.quick else SAMPLES
        self.raw, self.text = folder / f"{name}.raw", folder / f"{name}.txt"
        self.image = (folder if args.quick else IMAGES) / f"profile-{name}.svg"

    @contextlib.contextmanager
    def spy(self, pid: int, children: bool = False) -> Iterator[None]:
        with profile_spy.recording(pid, self.raw, self.args.rate, children) as window:
            self.window = window
            yield

    def note(self, line: str) -> None:
        print(f"{self.name}: {line}", flush=True)
        self.notes.append(line)


def profile_fanout(run: Run) -> str:
    scenarios = fanout.QUICK if run.args.quick else fanout.SCENARIOS
    rounds = {"A": run.sizes.a_rounds, "B": run.sizes.b_rounds}
    sink = AsyncSink([(f"/{k}/", s.answer_s) for k, s in scenarios.items()])
    try:
        with (
            tempfile.TemporaryDirectory(prefix="bench-profile-") as work,
            common.web_bus(Path(work), env=fanout.ENV) as the_bus,
        ):
            fanout.subscribe(the_bus, sink, scenarios)
            with engines.worker(the_bus, None) as process:
                rss = engines.PeakRss(process.pid)

                def one(key: str) -> dict[str, Any]:
                    common.wait_quiet()
                    got = fanout.one_round(the_bus, sink, f"fan_{key.lower()}",
                                           scenarios[key].subscribers, rss)  # fmt: skip
                    if not got["complete"]:
                        raise RuntimeError(f"fan-out {key} did not reach every subscriber")
                    return got

                for key in scenarios:  # the first round of each opens its connections
                    one(key)
                with run.spy(process.pid):
                    for key, scenario in scenarios.items():
                        for _ in range(rounds[key]):
                            got = one(key)
                            cpu = got["worker_cpu_ms"]
                            run.note(f"{key} ({scenario.title}): p99 {got['p99']:,.0f} ms, "
                                     f"worker CPU {cpu:.2f} ms a delivery")  # fmt: skip
                rss.stop()
    finally:
        sink.stop()
    return (f"bench.fanout A ({scenarios['A'].title}) x {rounds['A']} rounds, "
            f"B ({scenarios['B'].title}) x {rounds['B']}")  # fmt: skip


def profile_keys(run: Run) -> str:
    case = keys.CASES[1]  # concurrency 64
    case = case._replace(events=case.events // 4) if run.args.quick else case
    origin, port, control = common.server_process(keys.serve)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="bench-profile-") as work,
            common.bus(Path(work)) as the_bus,
        ):
            the_bus.client("pub").close()
            keys.one_round(the_bus, control, port, case, 0)  # its connections, the scripts
            with run.spy(the_bus.pids["worker"]):
                for n in range(run.sizes.keys_rounds):
                    got = keys.one_round(the_bus, control, port, case, n + 1)
                    run.note(f"{got['events/s']:,.0f} events/s, worker CPU "
                             f"{got['worker CPU ms/event']:.2f} ms an event")  # fmt: skip
    finally:
        with contextlib.suppress(OSError):
            control.send("stop")
        origin.terminate()
    return (f"bench.keys, {case.label}: {case.events:,} events over {case.urls} urls "
            f"x {run.sizes.keys_rounds} rounds")  # fmt: skip


def profile_publish(run: Run) -> str:
    seconds, config = run.sizes.publish_s, "gevent:2"
    env = publish.shape(config)
    with (
        tempfile.TemporaryDirectory(prefix="bench-profile-") as work,
        common.web_bus(Path(work), env=env) as the_bus,
    ):
        web = the_bus.pids["web"]
        wait_until(lambda: len(children_of(web)) >= 2, what="gunicorn's workers")
        the_bus.client("pub").close()
        with contextlib.closing(the_bus.client("sub")) as sub:
            sub.ok("POST", "/subscription", publish.SUBSCRIPTION)
        roles = {"web": sorted(children_of(web)), "redis": [the_bus.pids["redis"]]}
        load = publish.loads(8)[1]  # one event a request
        publish.run_checked(the_bus, "wrk", load, 2.0, roles)  # warm-up
        for profiled in (False, True):
            common.wait_quiet()
            with run.spy(web, children=True) if profiled else contextlib.nullcontext():
                got = publish.run_checked(the_bus, "wrk", load, seconds, roles)
            run.note(f"{'with' if profiled else 'without'} py-spy: {got.request_rate:,.0f} "
                     f"req/s, p99 {got.p99:.2f} ms, web {got.cpu['web']:.2f} cores")  # fmt: skip
    return f"bench.publish, {load.name} under wrk, 8 connections, {config}, {seconds:.0f} s"


PROFILES: dict[str, tuple[str, Callable[[Run], str], profile_parts.Parts]] = {
    "fanout": ("busbar worker", profile_fanout, profile_parts.WORKER),
    "keys": ("busbar worker", profile_keys, profile_parts.WORKER),
    "publish": ("busbar web (both gunicorn workers)", profile_publish, profile_parts.WEB),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.profile", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few rounds, for a smoke run")
    parser.add_argument("--only", default=",".join(PROFILES), help="of: " + ", ".join(PROFILES))
    parser.add_argument("--rate", type=int, default=RATE, help="py-spy's samples a second")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    if unknown := set(names) - set(PROFILES):
        parser.error(f"unknown profile(s): {', '.join(sorted(unknown))}")
    if "publish" in names and not wrk.available():
        raise SystemExit(f"bench.profile: {wrk.MISSING}")
    tree = engines.tree()
    for name in names:
        process, profile, parts = PROFILES[name]
        run = Run(name, args)
        what = profile(run)
        when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        stacks = profile_spy.read(run.raw)
        run.note(profile_spy.errors(run.raw))
        if run.window:
            run.note(run.window.says(sum(stacks.values())))
        heading = [f"{process} under {what}", f"py-spy --gil at {args.rate} Hz; {tree}, {when}"]
        title = "; ".join(heading)
        image = profile_flame.write(stacks, heading, run.image)
        text = "\n".join([title, *run.notes, "", profile_parts.table(stacks, parts), "",
                          profile_spy.top(stacks)])  # fmt: skip
        run.text.write_text(text + "\n")
        print(f"\n{text}\n\nflame graph: {image.relative_to(ROOT)}; samples: "
              f"{run.raw.relative_to(ROOT)}\n", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
