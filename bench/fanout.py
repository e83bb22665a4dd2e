"""Fan-out to many slow subscribers: one event published to a topic that every one of
them follows, on one `busbar worker` with product defaults; the asyncio engine (this
tree) against the thread engine it replaced (a worker from a git worktree under var/),
in the same run, on the same Redis, web and subscribers. A: 1,000 subscribers answering
in 50 ms; B: 10,000 answering in 1 s, a load no thread pool of a process carries.

Measured per round: when each subscriber had the event (ms after the publish's
answer), CPU per delivery of the worker, of Redis and of the subscriber process, and
the worker's RSS: idle (after its start) and at peak, and the peak less idle per 1,000
deliveries in flight at once (counted by the subscriber: requests it was still
answering). Subscriptions use `timeout: 0`, so every batch is due at once: the figures
are the worker's, not the batching wait's. The subscriber is one bench.asyncsink
process, so 10,000 connections cost it a socket each and not a thread.

    .venv/bin/python -m bench.fanout [--quick] [--baseline REV] [--one-origin]

--one-origin: the sink stands for ONE capable origin (a load balancer or an API gateway
in front of many services: an asyncio server with a deep accept queue), and the worker
keeps the product's defaults for connections per origin (the adaptive limit,
app/delivery/origin_limit.py) instead of having no bound; the report goes to
bench/results/fanout-one-origin.md. Compare with --baseline naming the commit before.
It adds C, B's load on 250 origins (the sink listening on 127.0.0.1 to 127.0.0.250, 40
subscribers each, below any origin's limit): the same run's yardstick for what one
origin costs a delivery (issue 54: no more worker CPU than there). B and C take turns,
four measured rounds each, and the report's headlines give B's CPU over C's.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from bench import common, engines
from bench.asyncsink import AsyncSink

COMMAND = ".venv/bin/python -m bench.fanout"
# the one sink process stands for each subscriber's own server: no bound per origin
ENV = {"BUSBAR_REDIS_MAX_MEM": str(1 << 30), "BUSBAR_ORIGIN_CONNECTIONS": "100000",
       "BUSBAR_ORIGIN_CONNECTING": "10000"}  # fmt: skip
ONE_ORIGIN_ENV = {"BUSBAR_REDIS_MAX_MEM": str(1 << 30)}  # connections per origin: defaults
IDLE_S = 12  # covers a run of every ticker (Autodrop every 5 s, Monitor and Expire 10 s)


class Scenario(NamedTuple):
    subscribers: int
    answer_s: float  # each one's time to answer
    rounds: int  # after the first (which opens the worker's connections)
    origins: int = 1  # the loopback addresses their callbacks are spread over (--one-origin)

    @property
    def title(self) -> str:
        title = f"{self.subscribers:,} subscribers x {self.answer_s * 1000:,.0f} ms"
        return title + (f" on {self.origins} origins" if self.origins > 1 else "")


SCENARIOS = {"A": Scenario(1000, 0.05, 5), "B": Scenario(10_000, 1.0, 1)}
QUICK = {"A": Scenario(200, 0.05, 1), "B": Scenario(1000, 1.0, 1)}
# --one-origin's yardstick (issue 54): B's load on 250 origins, where no origin's limit
# is reached, so the worker CPU a delivery costs on one origin has a same-run baseline
ORIGINS = 250
SPREAD = {"C": Scenario(10_000, 1.0, 4, ORIGINS)}
SPREAD_QUICK = {"C": Scenario(1000, 1.0, 1, ORIGINS)}


def subscribe(the_bus: common.Bus, sink: AsyncSink, scenarios: dict[str, Scenario]) -> None:
    """The publisher `pub`, and each scenario's subscribers on fan_<key> (bench.profile's too)."""
    the_bus.client("pub").close()
    engines.subscribe_many(the_bus, [
        (f"{k.lower()}{i}", {"topics": [f"fan_{k.lower()}"], "timeout": 0,
          "callback": f"http://127.0.0.{1 + i % s.origins}:{sink.port}/{k}/{i}"})
        for k, s in scenarios.items() for i in range(s.subscribers)
    ])  # fmt: skip


def one_round(
    the_bus: common.Bus, sink: AsyncSink, name: str, count: int, rss: engines.PeakRss
) -> dict[str, Any]:
    """Publish one event to topic `name`; every arrival, and what the fan-out cost once
    the last answer was acknowledged."""
    sink.take()
    sink.stats()  # a new peak from here
    start, worker, subscriber = sink.received, the_bus.pids["worker"], sink.process.pid
    assert subscriber is not None  # started
    pids: dict[str, list[int]] = {"worker": [worker], "subscriber": [subscriber],
            "redis": [p for n, p in the_bus.pids.items() if n.startswith("redis")]}  # fmt: skip
    rss.reset()
    cpu0 = {k: sum(common.cpu_seconds(p) for p in ps) for k, ps in pids.items()}
    began = time.monotonic()
    with contextlib.closing(the_bus.api("pub")) as pub:
        pub.ok("POST", f"/topics/{name}", {"type": "create", "url": "https://o.test/1"})
        sent = time.time() * 1000
    complete = sink.wait_for(start + count, 300)
    peak = 0
    while True:  # until every one is answered (stats() starts a new peak each call)
        stats = sink.stats()
        peak = max(peak, stats["peak_in_flight"])
        if not stats["in_flight"]:
            break
        time.sleep(0.02)
    time.sleep(0.3)  # and acknowledged
    cpu = {k: sum(common.cpu_seconds(p) for p in ps) - cpu0[k] for k, ps in pids.items()}
    arrivals = sorted(at - sent for at, _, _ in sink.take())
    return {
        "complete": complete and len(arrivals) == count,
        "p50": common.pct(arrivals, 50),
        "p99": common.pct(arrivals, 99),
        "max": arrivals[-1] if arrivals else 0.0,
        **{f"{k}_cpu_ms": v * 1000 / count for k, v in cpu.items()},  # per delivery
        "rss_peak_kib": rss.peak,
        "in_flight": peak,
        "seconds": time.monotonic() - began,
        "samples": arrivals,
    }


def idle(the_bus: common.Bus) -> dict[str, float]:
    """CPU ms per s of the worker and of Redis with nothing to deliver, over IDLE_S: the
    upkeep (heartbeat, scheduler, tickers that walk every subscriber) that a long round
    pays as well, which is not the deliveries' cost."""
    pids = {"worker": [the_bus.pids["worker"]],
            "redis": [p for n, p in the_bus.pids.items() if n.startswith("redis")]}  # fmt: skip
    before = {k: sum(common.cpu_seconds(p) for p in ps) for k, ps in pids.items()}
    time.sleep(IDLE_S)
    return {k: (sum(common.cpu_seconds(p) for p in ps) - before[k]) * 1000 / IDLE_S
            for k, ps in pids.items()}  # fmt: skip


def plan(scenarios: dict[str, Scenario]) -> list[tuple[str, int]]:
    """(scenario, round) in the order run: scenarios of one load (subscribers and answer
    time: B and C) take turns round by round, so that neither is measured only after
    the other (the first round after a switch pays for the connections the other left),
    and a noisy minute falls on both."""
    loads: dict[tuple[int, float], list[str]] = {}
    for key, s in scenarios.items():
        loads.setdefault((s.subscribers, s.answer_s), []).append(key)
    return [
        (key, r)
        for keys in loads.values()
        for r in range(max(scenarios[k].rounds for k in keys) + 1)
        for key in keys
        if r <= scenarios[key].rounds
    ]


def run(args: argparse.Namespace, scenarios: dict[str, Scenario]) -> dict[str, dict]:
    """Every worker through every scenario: {worker: {"concurrency", "idle_kib",
    scenario: {"first": round, "rounds": [round, ...]}}}."""
    results: dict[str, dict] = {}
    hosts = max(s.origins for s in scenarios.values())
    sink = AsyncSink([(f"/{k}/", s.answer_s) for k, s in scenarios.items()], hosts)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="busbar-bench-") as work,
            common.web_bus(Path(work), env=ONE_ORIGIN_ENV if args.one_origin else ENV) as the_bus,
        ):
            began = time.monotonic()
            subscribe(the_bus, sink, scenarios)
            print(f"set up in {time.monotonic() - began:.0f} s", flush=True)
            for label, code in engines.variants(args.baseline).items():
                with engines.worker(the_bus, code) as process:
                    rss = engines.PeakRss(process.pid)
                    time.sleep(1)  # settled in
                    got: dict[str, Any] = {
                        "concurrency": engines.concurrency(code), "idle_kib": rss.reset(),
                        "idle": idle(the_bus),
                    }  # fmt: skip
                    for key, r in plan(scenarios):
                        scenario = scenarios[key]
                        common.wait_quiet()
                        one = one_round(the_bus, sink, f"fan_{key.lower()}",
                                        scenario.subscribers, rss)  # fmt: skip
                        slot = got.setdefault(key, {"rounds": []})
                        if r:
                            slot["rounds"].append(one)
                        else:
                            slot["first"] = one
                        brief = {k: v for k, v in one.items() if k != "samples"}
                        print(f"{label} {key} round {r}: {brief}", flush=True)
                    rss.stop()
                results[label] = got
    finally:
        sink.stop()
    return results


def cpu_less_idle(
    got: dict[str, Any], key: str, scenario: Scenario, role: str = "worker"
) -> list[float]:
    """`role`'s CPU a delivery in each measured round of `key`, less its idle rate."""
    rate = got["idle"][role]
    return [
        r[f"{role}_cpu_ms"] - rate * r["seconds"] / scenario.subscribers for r in got[key]["rounds"]
    ]


def table(key: str, scenario: Scenario, results: dict[str, dict]) -> list[str]:
    lines = [
        f"### {key}: one event to {scenario.title}",
        "",
        "| worker | concurrency | p50 | p99 | last | first round: p99 "
        "| worker CPU per delivery | Redis CPU per delivery "
        "| subscriber CPU per delivery | in flight at peak | worker RSS idle | peak "
        "| peak less idle per 1,000 in flight |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, got in results.items():
        runs, first = got[key]["rounds"], got[key]["first"]

        def col(field: str, fmt: str = "{:,.0f}", runs: list = runs) -> str:
            return common.spread([r[field] for r in runs], fmt)

        idle = got["idle_kib"] / 1024

        def busy(role: str, got: dict[str, Any] = got) -> str:
            rate, less = got["idle"][role], cpu_less_idle(got, key, scenario, role)
            return (f"{col(f'{role}_cpu_ms', '{:.2f}')} ms; less idle: "
                    f"{common.spread(less, '{:.2f}')} ms (idle: {rate:.0f} ms/s)")  # fmt: skip

        peaks = [r["rss_peak_kib"] / 1024 for r in runs]
        per = [(p - idle) * 1000 / max(1, r["in_flight"]) for p, r in zip(peaks, runs, strict=True)]
        lines.append(
            f"| {label} | {got['concurrency']} | {col('p50')} ms | {col('p99')} ms "
            f"| {col('max')} ms | {first['p99']:,.0f} ms | {busy('worker')} | {busy('redis')} "
            f"| {col('subscriber_cpu_ms', '{:.2f}')} ms "
            f"| {col('in_flight')} | {idle:.0f} MiB | {common.spread(peaks)} MiB "
            f"| {common.spread(per, '{:.1f}')} MiB |"
        )
    return [*lines, ""]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.fanout", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short run, for a smoke check")
    parser.add_argument("--baseline", default=engines.BASELINE, help="commit to compare with")
    parser.add_argument(
        "--one-origin",
        action="store_true",
        help="one capable origin, connections per origin at their defaults",
    )
    args = parser.parse_args(argv)
    scenarios = QUICK if args.quick else SCENARIOS
    if args.one_origin:  # B as many rounds as C: they take turns (plan())
        spread = SPREAD_QUICK if args.quick else SPREAD
        scenarios = scenarios | {"B": scenarios["B"]._replace(rounds=spread["C"].rounds)} | spread
    results = run(args, scenarios)
    every = [r for got in results.values() for k in scenarios for r in
             [got[k]["first"], *got[k]["rounds"]]]  # fmt: skip
    if not all(r["complete"] for r in every):
        raise RuntimeError("a fan-out did not reach every subscriber within 300 s")
    command = (
        COMMAND + (" --quick" if args.quick else "") + (" --one-origin" if args.one_origin else "")
    )
    name = "fanout-one-origin" if args.one_origin else "fanout"
    total = sum(s.subscribers for s in scenarios.values())
    lines = [
        "# Fan-out to many slow subscribers on one capable origin: adaptive limit against fixed"
        if args.one_origin
        else "# Fan-out to many slow subscribers: asyncio engine against thread engine",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        " ".join(x.strip() for x in "\n".join(__doc__.split("\n\n")[:2]).splitlines()),
        f"The subscriber process runs on {engines.loop_name()}; every process shares the "
        "same 2 cores. Median (min-max) over the rounds after a scenario's first, which is "
        "shown apart (A's first is the worker's first fan-out: it opens its connections). "
        f"The worker's and Redis's CPU while idle are measured for {IDLE_S} s after the "
        'worker starts; "less idle" takes that rate over the round\'s length off the '
        f"round's CPU: upkeep (tickers walking all {total:,} subscribers) is paid per second, "
        "and a 100 s round of the thread engine pays much of it. The baseline "
        f"is commit {args.baseline}.",
        "",
    ]
    for key, scenario in scenarios.items():
        lines += table(key, scenario, results)
    common.write_report(name, "\n".join(lines))
    common.write_samples(name, {
        f"{k}: {s.title}, {label}": [x for r in got[k]["rounds"] for x in r["samples"]]
        for k, s in scenarios.items() for label, got in results.items()
    })  # fmt: skip
    heads = []
    for key, scenario in scenarios.items():
        for label, got in results.items():
            runs, cpu = got[key]["rounds"], cpu_less_idle(got, key, scenario)
            heads.append((
                f"{key}: {scenario.title}, {label}: p99; worker CPU per delivery, less idle",
                common.spread([r["p99"] for r in runs]) + " ms; "
                + common.spread(cpu, "{:.2f}") + " ms",
            ))  # fmt: skip
    if "C" in scenarios:
        for label, got in results.items():
            b, c = (statistics.median(cpu_less_idle(got, k, scenarios[k])) for k in "BC")
            heads.append((f"B over C: worker CPU per delivery, {label}", f"{b / c:.2f}x"))
    common.write_headlines(name, heads)


if __name__ == "__main__":
    main()
