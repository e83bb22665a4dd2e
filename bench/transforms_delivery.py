"""Route transforms at delivery (issue 57), end to end: what they cost a publish and the
worker, and whether a hostile one holds up anybody else's delivery.

Redis, `busbar web` and one `busbar worker`, each a real process with the product's
defaults (transforms at their default bounds: 50 ms, depth 300, 256 KiB); every
subscriber's callback is a path of one bench.asyncsink process that answers at once.

Fan-out: one-event publishes (Python client threads, bench/loadgen) of an order event
to a topic of 10 subscribers none of whose routes transforms (a), against a topic of 10
that each transform it (b): 5 pick and rename 5 fields, 5 make a Slack message with a
string template (docs/transforms.md's examples). Publishes/s while the worker delivers,
and delivered events/s end to end (every delivery the receivers counted, from the load's
start to the last arrival); the two loads interleaved, their order turning each round,
ratios taken within a round. The web evaluates no transform, so b/a of publishes says
whether publish pays for them (the aim: 0.7); b/a of deliveries is what the worker pays.

Hostile transforms: two healthy subscribers of one topic, one without a transform and
one with the pick-and-rename one, take 200 events/s; beside them, one case at a time,
a subscriber (max 1: each event a batch of its own) whose transform is hostile takes
5 events/s, each carrying 10 KB of `a`: a recursion with no base case, a string doubled
40 times, an endless tail call (no depth to count: it fails on time), `(a+)+b` on the
10 KB, a 10 MB output, and an expression error that fails at once (the floor). Per case:
how long its events took from publish to their dead letter (its `failed_at`) or to their
receipt, and the healthy subscribers' latency, publish to receipt from each event's own
send time, against a window with no hostile events in the same round (the aim: p99
within 20%). Those windows are minutes apart, and this machine drifts by minutes: the
aim is read, last, in alternating slots of one healthy load (bench/transforms_beside.py,
with a null ratio and a neighbour whose transform does its job). Every subscription has
`timeout: 0`, so no batching wait is in a figure.

    .venv/bin/python -m bench.transforms_delivery [--quick]
"""

from __future__ import annotations

import collections
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench import common, loadgen, transforms_beside, transforms_cases
from bench.asyncsink import AsyncSink
from bench.common import Bus
from bench.loadgen import Load
from bench.transforms_cases import (
    ABSENT,
    HEALTHY,
    HEALTHY_NAMES,
    HEALTHY_TOPIC,
    HOSTILE,
    ORDER,
    PICK,
    SLACK,
    TEXT,
    publish,
    stamped,
)  # fmt: skip
from spec.integration.processes import children_of

COMMAND = ".venv/bin/python -m bench.transforms_delivery"
ENV = {"BUSBAR_REDIS_MAX_MEM": str(1 << 30)}  # a fan-out's backlog grows while it runs
FANOUT, CONNECTIONS, WAIT_S, DISTURBED = 10, 8, 180.0, 0.15
FAN = {"(a) no transforms": "fan_plain", "(b) 10 transforms": "fan_shaped"}


def subscribe(the_bus: Bus, sink: AsyncSink) -> None:
    """The publisher; 10 subscribers on each fan-out topic; the healthy pair; one hostile
    subscriber per case, each on its own topic."""
    url = f"http://127.0.0.1:{sink.port}"
    the_bus.client("pub").close()
    wanted: dict[str, dict[str, Any]] = {}
    for i in range(FANOUT):
        shaped = {"topic": FAN["(b) 10 transforms"], "transform": PICK if i < 5 else SLACK}
        wanted[f"fa{i}"] = {"topics": [FAN["(a) no transforms"]], "callback": f"{url}/a/{i}"}
        wanted[f"fb{i}"] = {"topics": [shaped], "callback": f"{url}/b/{i}"}
    wanted = {token: {"max": 100, "timeout": 0} | s for token, s in wanted.items()}
    transforms_cases.subscribe(the_bus, wanted | transforms_cases.subscriptions(url))


def fan_load(the_bus: Bus, sink: AsyncSink, name: str, seconds: float) -> dict[str, Any]:
    """One load of one-event publishes to a fan-out topic for `seconds`, then until all 10
    subscribers have every event or its dead letter: the publish figures, deliveries/s
    from the load's start to the last arrival, the worker's CPU per published event over
    both, and how many deliveries were dead-lettered instead."""
    body = json.dumps({"type": "create", "url": "https://shop.test/orders/1042", "data": ORDER})
    load = Load(name, "POST", f"/topics/{FAN[name]}", "pub", [body.encode()] * CONNECTIONS, 1, 204)
    worker = the_bus.pids["worker"]
    roles = {
        "web": sorted(children_of(the_bus.pids["web"])), "redis": [the_bus.pids["redis"]],
        "worker": [worker, *children_of(worker)], "sink": [sink.process.pid or 0],
    }  # fmt: skip
    sink.take()
    start, dead0 = sink.received, dead_letters(the_bus, "f")
    cpu0, began = common.cpu_seconds(worker), time.time() * 1e3
    sample = loadgen.run_python(the_bus.port, load, seconds, roles)
    published = len(sample.latencies)
    deadline, dead = time.monotonic() + WAIT_S, 0
    while not (complete := sink.received - start + dead >= published * FANOUT):
        if time.monotonic() > deadline:
            break
        time.sleep(0.25)
        dead = dead_letters(the_bus, "f") - dead0
    time.sleep(0.3)  # the last acknowledgements
    cpu = common.cpu_seconds(worker) - cpu0
    last = max(at for at, _, _ in sink.take())
    took = (last - began) / 1e3
    return {
        "rate": sample.rate, "p50": sample.p50, "p99": sample.p99,
        "web_us": sample.micros("web"), "delivered": (sink.received - start) / took,
        "worker_ms": cpu * 1e3 / published, "worker_cores": sample.cpu["worker"],
        "drain_s": took - seconds,
        "other": sample.cpu["other"], "complete": complete, "dead": dead,
    }  # fmt: skip


def dead_letters(the_bus: Bus, prefix: str) -> int:
    """Dead letters of the subscribers whose client name starts with `prefix`: an event
    whose transform failed never arrives, so a load waits for deliveries and these."""
    with contextlib.closing(the_bus.api()) as root:
        listed = json.loads(root.ok("GET", "/subscriptions"))
    return sum(s["deadletters"] for s in listed if s["name"].startswith(prefix))


def letters(the_bus: Bus, token: str) -> list[dict[str, Any]]:
    with contextlib.closing(the_bus.api(token)) as api:
        return json.loads(api.ok("GET", "/subscriber/deadletters"))


def window(the_bus: Bus, sink: AsyncSink, case: str, seconds: float, rate: float,
           hostile_rate: float) -> dict[str, Any]:  # fmt: skip
    """The healthy load for `seconds`, with the case's hostile events beside it (none for
    ABSENT); then until every event was received or dead-lettered. The healthy pair's
    latencies (ms), each hostile event's time to its dead letter or receipt (ms), and
    what became of them."""
    token = HOSTILE[case][0] if case in HOSTILE else ""
    healthy, hostile = int(rate * seconds), int(hostile_rate * seconds) if token else 0
    sink.take()
    late: list[float] = []
    worker, healthy_dead0 = the_bus.pids["worker"], dead_letters(the_bus, "h_")
    cpu0, began = common.cpu_seconds(worker), time.monotonic()
    busy0, ours0 = common.busy_seconds(), transforms_beside.ours(the_bus, sink)
    pool = [publish(the_bus, HEALTHY_TOPIC, stamped(ORDER), rate, healthy, 2, late)]
    if token:
        pool.append(publish(the_bus, token, stamped({"text": TEXT}), hostile_rate, hostile, 1, []))
    for thread in pool:
        thread.join()
    theirs = common.busy_seconds() - busy0 - (transforms_beside.ours(the_bus, sink) - ours0)
    other = max(0.0, theirs / (time.monotonic() - began))
    records: list[common.Record] = []
    dead: list[dict[str, Any]] = []
    deadline, healthy_dead = time.monotonic() + WAIT_S, 0
    while time.monotonic() < deadline:
        records += sink.take()
        dead = letters(the_bus, token) if token else []
        healthy_dead = dead_letters(the_bus, "h_") - healthy_dead0
        got = collections.Counter(path.split("/")[1] for _, path, s in records for _ in s)
        if got["h"] + healthy_dead >= len(HEALTHY) * healthy and got["x"] + len(dead) >= hostile:
            break
        time.sleep(0.1)
    cores = (common.cpu_seconds(worker) - cpu0) / (time.monotonic() - began)
    if token:
        with contextlib.closing(the_bus.api(token)) as api:
            api.ok("DELETE", "/subscriber/deadletters")
    latencies: dict[str, list[float]] = {name: [] for name in HEALTHY}
    reached: list[float] = []
    for at, path, stamps in records:
        _, kind, name = path.split("/")
        for stamp in stamps:
            (latencies[name] if kind == "h" else reached).append(at - stamp[1])
    failed = [d["failed_at"] - d["data"]["s"][1] for d in dead]
    sent = [(d["data"]["s"][1], d["failed_at"]) for d in dead] + [
        (stamp[1], at) for at, path, stamps in records if path.startswith("/x/") for stamp in stamps
    ]  # fmt: skip
    fates = collections.Counter([d["last_status"] for d in dead] + ["delivered"] * len(reached))
    return {
        "latencies": latencies, "took": failed + reached, "fates": dict(fates),
        "first": min(sent)[1] - min(sent)[0] if sent else None,
        "missing": len(HEALTHY) * healthy + hostile - sum(map(len, latencies.values()))
        - len(failed) - len(reached) - healthy_dead, "healthy_dead": healthy_dead,
        "late_ms": max(late, default=0.0) * 1e3, "worker_cores": cores, "other": other,
    }  # fmt: skip


def measure(
    work: Path, rounds: int, fan_s: float, window_s: float, retries: Retries,
    slots: tuple[int, float],
) -> dict[str, Any]:  # fmt: skip
    """The three parts on one bus: the fan-out loads, the hostile windows (each part's
    cases interleaved and their order turning each round), then the healthy p99 in
    alternating slots (bench/transforms_beside.py)."""
    fans: dict[str, list[dict[str, Any]]] = {name: [] for name in FAN}
    cases = [ABSENT, *HOSTILE]
    windows: dict[str, list[dict[str, Any]]] = {case: [] for case in cases}
    sink = AsyncSink([("/", 0.0)])
    try:
        with common.web_bus(work, env=ENV) as the_bus, common.worker(the_bus):
            subscribe(the_bus, sink)
            for name in FAN:  # warm-up: connections, script cache, compiled transforms
                fan_load(the_bus, sink, name, 1.0)
            for r in range(rounds):
                for name in [*FAN][r % 2 :] + [*FAN][: r % 2]:
                    one = retries.steady(partial(fan_load, the_bus, sink, name, fan_s))
                    fans[name].append(one)
                    print(f"fan-out round {r + 1} {name}: {rounded(one)}", flush=True)
            window(the_bus, sink, ABSENT, 2.0, 200.0, 5.0)  # warm-up
            for r in range(rounds):
                turn = r % len(cases)
                for case in cases[turn:] + cases[:turn]:
                    one = retries.steady(partial(window, the_bus, sink, case, window_s, 200.0, 5.0))
                    windows[case].append(one)
                    print(f"hostile round {r + 1} {case}: {brief(one)}", flush=True)
            beside = transforms_beside.measure(the_bus, sink, *slots)
    finally:
        sink.stop()
    return {"fans": fans, "windows": windows, "beside": beside, "retried": retries.used}


class Retries:
    """A run's budget of loads measured again because another job on the 2 cores took
    more than DISTURBED of a core meanwhile: it would show as busbar's slowness."""

    def __init__(self, left: int) -> None:
        self.left, self.used = left, 0

    def steady(self, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        while True:
            common.wait_quiet()
            one = run()
            if one["other"] <= DISTURBED or self.used >= self.left:
                return one
            self.used += 1
            print(f"disturbed ({one['other']:.2f} cores of other jobs): again", flush=True)


def brief(one: dict[str, Any]) -> dict[str, Any]:
    """A window's figures for the progress line: percentiles, not every sample."""
    kept = {k: v for k, v in one.items() if k not in ("latencies", "took")}
    p99 = {name: round(common.pct(v, 99), 1) for name, v in one["latencies"].items()}
    took = round(statistics.median(one["took"]), 1) if one["took"] else None
    return rounded(kept) | {"healthy_p99": p99, "took_ms": took}


def rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}


def within(runs: list[dict[str, Any]], base: list[dict[str, Any]], value: Callable) -> list[float]:
    """value(run) / value(base run) of the same round."""
    return [value(r) / value(b) for r, b in zip(runs, base, strict=True)]


def p99_of(name: str) -> Callable[[dict[str, Any]], float]:
    return lambda run: common.pct(run["latencies"][name], 99)


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def fan_report(fans: dict[str, list[dict[str, Any]]], seconds: float) -> list[str]:
    spread = common.spread
    a, b = fans.values()
    publishes = within(b, a, lambda run: run["rate"])
    delivered = within(b, a, lambda run: run["delivered"])
    return [
        "## Fan-out: 10 subscribers, with and without transforms",
        "",
        f"One-event publishes from {CONNECTIONS} keep-alive connections for {seconds:g} s, "
        "then until every subscriber had every event (or its dead letter); delivered "
        "events/s: all deliveries over the time from the load's start to the last "
        "arrival. Worker CPU: over the load and the drain, per published event (10 "
        "deliveries). Dead-lettered: the loads' events whose transform failed, all rounds "
        f"(there should be none). Median (min-max) over {len(a)} rounds.",
        "",
        "| load | publishes/s | publish p50 ms | p99 ms | web µs/publish | delivered "
        "events/s | drain after the load, s | worker cores in the load "
        "| worker CPU ms/event | other cores | dead-lettered |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *[
            f"| {name} | {spread([r['rate'] for r in rs])} "
            f"| {statistics.median(r['p50'] for r in rs):.2f} "
            f"| {statistics.median(r['p99'] for r in rs):.2f} "
            f"| {statistics.median(r['web_us'] for r in rs):,.0f} "
            f"| {spread([r['delivered'] for r in rs])} "
            f"| {spread([r['drain_s'] for r in rs], '{:.1f}')} "
            f"| {spread([r['worker_cores'] for r in rs], '{:.2f}')} "
            f"| {spread([r['worker_ms'] for r in rs], '{:.2f}')} "
            f"| {statistics.median(r['other'] for r in rs):.2f} "
            f"| {sum(r['dead'] for r in rs)} |"
            for name, rs in fans.items()
        ],
        "",
        f"(b) over (a), within a round: publishes/s {spread(publishes, '{:.2f}')}x (the aim: "
        f"0.7x; {verdict(statistics.median(publishes) >= 0.7)}); delivered events/s "
        f"{spread(delivered, '{:.2f}')}x."
        + ("" if all(r["complete"] for rs in fans.values() for r in rs) else
           f" INCOMPLETE: a load's events were not all received or dead-lettered within "
           f"{WAIT_S:g} s."),
        "",
    ]  # fmt: skip


def hostile_report(windows: dict[str, list[dict[str, Any]]], seconds: float) -> list[str]:
    spread, base = common.spread, windows[ABSENT]
    floor = [statistics.median(r["took"]) for r in windows[next(iter(HOSTILE))]]
    rows = []
    for case, runs in windows.items():
        took = [statistics.median(r["took"]) for r in runs if r["took"]]
        fates = collections.Counter[str]()
        for r in runs:
            fates.update(r["fates"])
        cells = [
            case, ", ".join(f"{k} ({v})" for k, v in fates.items()) or "-",
            spread(took, "{:.1f}") if took else "-",
            spread([t - f for t, f in zip(took, floor, strict=False)], "{:.1f}") if took else "-",
            spread(first, "{:.1f}") if (first := [r["first"] for r in runs if r["first"]]) else "-",
        ]  # fmt: skip
        for name in HEALTHY:
            p50 = statistics.median(common.pct(r["latencies"][name], 50) for r in runs)
            p99 = statistics.median(p99_of(name)(r) for r in runs)
            cells += [f"{p50:.1f} / {p99:.1f}", spread(within(runs, base, p99_of(name)), "{:.2f}")]
        cells.append(spread([r["worker_cores"] for r in runs], "{:.2f}"))
        cells.append(f"{statistics.median(r['other'] for r in runs):.2f}")
        cells.append(str(sum(r["healthy_dead"] for r in runs)))
        cells.append(str(sum(r["missing"] for r in runs)))
        rows.append("| " + " | ".join(cells) + " |")
    names = list(HEALTHY_NAMES.values())
    moved = {
        case: max(statistics.median(within(windows[case], base, p99_of(n))) for n in HEALTHY)
        for case in HOSTILE
    }
    met = [case for case, ratio in moved.items() if ratio < 1.2]
    return [
        "## Hostile transforms beside healthy subscribers",
        "",
        f"Windows of {seconds:g} s: the healthy pair's topic at 200 events/s, the hostile "
        "case's at 5 events/s (max 1), then until every event was received or "
        "dead-lettered. Took: from an event's send to its dead letter's `failed_at` (or "
        "to its receipt), median of a round's events; less the floor: less the "
        "expression error's median in the same round (queueing, the take, the ack); "
        "first: the window's first hostile event, publish to dead letter or receipt (the "
        "slow lane's share of a core, BUSBAR_TRANSFORM_SLOW_MS, holds back those behind a "
        "time-out: docs/transforms.md). "
        "Healthy latency: publish to receipt, p50 / p99 ms (median over rounds); p99 vs "
        "none: over the window with no hostile events in the same round (the aim: under "
        f"1.2x). Dead-lettered and missing (neither received nor dead-lettered): events "
        f"of the healthy pair, all rounds. Median (min-max) over {len(base)} rounds.",
        "",
        "| hostile transform | its events' fate | took ms | less the floor | first ms "
        f"| {names[0]} p50 / p99 | p99 vs none | {names[1]} p50 / p99 | p99 vs none | worker cores "
        "| other cores | healthy dead-lettered | missing |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "Both healthy subscribers' p99 within 1.2x of none (median of the rounds' ratios): "
        f"met beside {', '.join(met) or 'none'}; NOT met beside "
        f"{', '.join(c for c in HOSTILE if c not in met) or 'none'}.",
        "",
    ]  # fmt: skip


def report(command: str, found: dict[str, Any], fan_s: float, window_s: float,
           slots: tuple[int, float]) -> str:  # fmt: skip
    return "\n".join([
        "# Route transforms at delivery: fan-out cost, and hostile transforms beside "
        "healthy subscribers",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        "Redis, `busbar web` and one `busbar worker` (defaults; transforms at 50 ms, depth "
        "300, 256 KiB), subscribers on one asyncio receiver process answering at once; "
        "every subscription `timeout: 0`. Transforms: docs/transforms.md's.",
        "",
        "Median (min-max) over rounds; other cores: the machine's busy time beyond "
        "busbar's processes, the receiver and the publishers, during the load (a load "
        f"where it passed {DISTURBED} was measured again, {found['retried']} times in this "
        "run).",
        "",
        *fan_report(found["fans"], fan_s),
        *hostile_report(found["windows"], window_s),
        *transforms_beside.report(found["beside"], *slots),
    ])  # fmt: skip


def headlines(found: dict[str, Any]) -> list[tuple[str, str]]:
    spread = common.spread
    a, b = found["fans"].values()
    windows, base = found["windows"], found["windows"][ABSENT]
    worst = {name: [max(within(windows[c], base, p99_of(name))[r] for c in HOSTILE)
                    for r in range(len(base))] for name in HEALTHY}  # fmt: skip
    tail = [r["first"] for r in windows["an endless tail call"] if r["first"]]
    return [
        ("publish 1 event to 10 subscribers with transforms, against none",
         spread(within(b, a, lambda r: r["rate"]), "{:.2f}") + "x"),
        ("delivered events/s, 10 transforms against none",
         spread(within(b, a, lambda r: r["delivered"]), "{:.2f}") + "x"),
        *[(f"{HEALTHY_NAMES[name]}: p99 beside the worst hostile case, against none",
           spread(values, "{:.2f}") + "x") for name, values in worst.items()],
        *[(f"{HEALTHY_NAMES[name]}: p99 beside the worst hostile case, alternating slots",
           f"{max(found['beside'][c].ratio(name) for c in HOSTILE):.2f}x (null "
           f"{max(found['beside'][c].null(name) for c in HOSTILE):.2f}x)") for name in HEALTHY],
        ("an endless tail call, a window's first: publish to dead letter, ms",
         spread(tail, "{:.1f}")),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    quick = common.quick_flag("bench.transforms_delivery", __doc__, argv)
    rounds, fan_s, window_s, tries = (1, 1.5, 3.0, 0) if quick else (4, 3.0, 8.0, 8)
    slots = (2, 2.0) if quick else (16, 3.0)
    with tempfile.TemporaryDirectory(prefix="busbar-bench-") as work:
        found = measure(Path(work), rounds, fan_s, window_s, Retries(tries), slots)
    command = COMMAND + (" --quick" if quick else "")
    common.write_report("transforms_delivery", report(command, found, fan_s, window_s, slots))
    common.write_samples("transforms_delivery", {
        f"{HEALTHY_NAMES[name]}, beside {case}": [x for r in runs for x in r["latencies"][name]]
        for name in HEALTHY for case, runs in found["windows"].items()
    })  # fmt: skip
    common.write_headlines("transforms_delivery", headlines(found))


if __name__ == "__main__":
    main()
