"""End-to-end delivery benchmark: Redis, `busbar web` and one `busbar worker` as real
processes, publishing over HTTP to a local subscriber that counts what arrives.

Throughput is timed from the first publish to the last event received, publishing in
bulk while the worker delivers, because that overlap is how a bus runs in production;
with 1, 50 and 500 subscribers of one topic (fan-out). Latency is measured at a steady
offered load by paced single-event publishes; each event carries its send time, and the
batching wait a subscriber asked for (its `timeout`, or the time its batch took to fill
to `max`) is subtracted, leaving what busbar adds.

Every round runs it all with this tree's worker and with the thread engine's (commit
bench.engines.BASELINE, a worktree under var/), one after the other on the same Redis
and web, the order turning round each round (bench.versus), both with the product's
default concurrency (96 threads, 5,000 slots); the throughput runs, and the latency runs
with more subscribers than 96, once more with this tree at 96 slots, the baseline's
count, to set the engines side by side at equal concurrency.

    .venv/bin/python -m bench.delivery [--quick] [--baseline REV]

--baseline sets another commit in the thread engine's place: an asyncio-engine baseline
runs with its defaults only (no equal-concurrency worker, which only the thread engine
needs).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import common, engines, versus
from bench.common import Api, Bus, Sink
from bench.delivery_versus import Runs, report

BULK = 500  # events per publish POST in the throughput runs
PUBLISHERS = 8  # client threads sharing the paced schedule (a publish takes a few ms)
WAIT_S = 60.0  # most a run waits for the last event before giving up (bounded runtime)
# concurrency: each worker's own (bench.versus); the one sink stands for each subscriber's
# own server, so no bound per origin (app/delivery/gate.py; bench.origin measures it)
ENV = {"BUSBAR_REDIS_MAX_MEM": str(1 << 30), "BUSBAR_ORIGIN_CONNECTIONS": "100000",
       "BUSBAR_ORIGIN_CONNECTING": "10000"}  # fmt: skip
COMMAND = ".venv/bin/python -m bench.delivery"
Case = tuple[int, int, int, int]  # subscribers, max, timeout ms, offered events/s


@dataclass(frozen=True)
class Plan:
    """How much a run does: the full run, or --quick for a smoke check."""

    rounds: int
    published: dict[int, int]  # subscribers -> events published per throughput run
    seconds: float  # length of one latency run
    latency: dict[str, Case]


FULL = Plan(3, {1: 100_000, 50: 2_000, 500: 500}, 5.0, {
    "1 sub, max 1, timeout 0, 1,000/s": (1, 1, 0, 1_000),
    "1 sub, max 100, timeout 500 (defaults), 1,000/s": (1, 100, 500, 1_000),
    "1 sub, max 1, timeout 0, 250/s (below max 1's ceiling)": (1, 1, 0, 250),
    "50 subs, max 100, timeout 500, 100/s": (50, 100, 500, 100),
    "500 subs, max 100, timeout 2000, 20/s": (500, 100, 2_000, 20),
})  # fmt: skip
QUICK = Plan(1, {1: 10_000, 50: 500, 500: 100}, 1.5, FULL.latency)


def subscribe(the_bus: Bus, sink: Sink, name: str, topic: str, **opts: int) -> Api:
    """A new client subscribed to `topic` with its own callback path on the sink."""
    api = the_bus.client(name)
    body = {"topics": [topic], "callback": f"http://127.0.0.1:{sink.port}/{name}", **opts}
    api.ok("POST", "/subscription", body)
    return api


def cpu(the_bus: Bus, sink: Sink) -> dict[str, float]:
    """CPU seconds so far of each process taking part, to show where the time goes."""
    return {
        **the_bus.cpu(),
        "subscriber": common.cpu_seconds(sink.process.pid or 0),
        "publisher (bench)": common.cpu_seconds(os.getpid(), tree=False),
    }


def per_event_us(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
    return {k: (after[k] - before.get(k, 0.0)) / max(n, 1) * 1e6 for k in after}


def unsubscribe(apis: list[Api]) -> None:
    """Drop the run's subscribers, so the next run's publishes do not feed them."""
    for api in apis:
        api.call("DELETE", "/subscriber")
        api.close()


def throughput(the_bus: Bus, sink: Sink, subs: int, published: int, tag: str) -> dict[str, Any]:
    """Delivered events/s with `subs` subscribers of one topic, max 100, timeout 0; every
    POST's events carry its send time, for the latency of a saturated bus."""
    topic, bulk = common.topic_name(f"p{tag}"), min(BULK, published)
    publisher = the_bus.client(f"pub{tag}")
    apis = [subscribe(the_bus, sink, f"s{tag}-{i}", topic, max=100, timeout=0) for i in range(subs)]
    sink.take()
    expected, start_count = published * subs, sink.received
    body = [{"type": "create", "url": f"https://o.test/{i}"} for i in range(bulk)]
    calls0 = versus.calls_now(the_bus)
    cpu0, t0, snap = cpu(the_bus, sink), time.perf_counter(), common.others()
    publish_s: list[float] = []

    def publish() -> None:
        for _ in range(published // bulk):
            stamp = {"s": time.time() * 1e3}
            publisher.ok("POST", f"/topics/{topic}", [e | {"data": stamp} for e in body])
        publish_s.append(time.perf_counter() - t0)

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    complete = sink.wait_for(start_count + expected, WAIT_S)
    elapsed = time.perf_counter() - t0
    thread.join(WAIT_S)
    cpu1, got, records = cpu(the_bus, sink), sink.received - start_count, sink.take()
    used = versus.calls_since(the_bus, calls0)
    per_path: dict[str, int] = {}
    for _, path, stamps in records:
        per_path[path] = per_path.get(path, 0) + len(stamps)
    unsubscribe([*apis, publisher])
    return {
        "rate": got / elapsed,
        "complete": complete and list(per_path.values()) == [published] * subs,
        "publish_rate": published / publish_s[0] if publish_s else 0.0,
        "cpu_us": per_event_us(cpu0, {**cpu1, "others": common.others_since(snap)}, got),
        # the worker's, near enough: a publish of 500 adds one EVALSHA
        "round_trips": (used.get("evalsha", 0) + used.get("blmove", 0)) / max(got, 1),
        "raw_all": [at - s for at, _, stamps in records for s in stamps],
    }


def added_latency(records: list[common.Record], max_events: int, timeout: int) -> list[float]:
    """Per event: receive time minus when its batch became due (full, or timed out)."""
    added = []
    for at, _, stamps in records:
        due = max(stamps) if len(stamps) >= max_events else min(stamps) + timeout
        added += [at - due] * len(stamps)
    return added


def latency(the_bus: Bus, sink: Sink, tag: str, case: Case, seconds: float) -> dict[str, Any]:
    """Paced single-event publishes at `rate`/s for `seconds` to a topic with `subs`
    subscribers; per-event latencies at each of them."""
    subs, max_events, timeout, rate = case
    topic, count = common.topic_name(f"l{tag}"), int(rate * seconds)
    publisher = the_bus.client(f"pub{tag}")
    apis = [
        subscribe(the_bus, sink, f"s{tag}-{i}", topic, max=max_events, timeout=timeout)
        for i in range(subs)
    ]
    sink.take()
    start_count = sink.received
    cpu0, snap, wall0 = cpu(the_bus, sink), common.others(), time.time() * 1e3 + 50

    def send(api: Api, i: int) -> None:
        event = {"type": "create", "url": f"https://o.test/{i}", "data": {"s": time.time() * 1e3}}
        api.ok("POST", f"/topics/{topic}", event)

    started = time.perf_counter()
    late = common.paced(rate, lambda: the_bus.api(f"pub{tag}"), send, count, PUBLISHERS)
    sent_s = time.perf_counter() - started - 0.05
    complete = sink.wait_for(start_count + count * subs, WAIT_S)
    cpu1, records = cpu(the_bus, sink), sink.take()
    raw = [at - s for at, _, stamps in records for s in stamps]
    added = added_latency(records, max_events, timeout)
    unsubscribe([*apis, publisher])
    return {
        "complete": complete,
        "achieved": count / sent_s,
        "delivered": len(raw) / (max(at for at, _, _ in records) - wall0) * 1e3,
        "cpu_us": per_event_us(cpu0, {**cpu1, "others": common.others_since(snap)}, len(raw)),
        "late_p99": common.pct(late, 99) * 1e3,
        "raw": (common.pct(raw, 50), common.pct(raw, 99)),
        "added": (common.pct(added, 50), common.pct(added, 99)),
        "raw_all": raw,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.delivery", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short run, for a smoke check")
    parser.add_argument("--baseline", default=engines.BASELINE, help="commit to compare with")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    base, ours = versus.defaults(args.baseline)
    workers = [(base, list(plan.latency)), (ours, list(plan.latency))]
    if base.threads:
        # at equal concurrency too, in the latency cases where it can matter: more
        # subscribers (deliveries due at once) than the baseline has threads
        _, equal = versus.equal(versus.BASELINE_THREADS, args.baseline)
        wide = [c for c, spec in plan.latency.items() if spec[0] > versus.BASELINE_THREADS]
        workers.append((equal, wide))
    runs = {who.label: Runs(who, plan) for who, _ in workers}
    snap, started = common.others(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="busbar-bench-") as work:
        sink = Sink()
        try:
            with common.web_bus(Path(work), env=ENV) as the_bus:
                for r in range(plan.rounds):
                    # each throughput case by every worker back to back (a case run after
                    # another worker's 500 subscribers ran slower, whichever engine ran it:
                    # a worker round of all cases made the order part of the ratio)
                    for subs, published in plan.published.items():
                        for k, (who, _) in enumerate(versus.in_turn(workers, r)):
                            with versus.worker(the_bus, who):
                                saturated(the_bus, sink, runs[who.label], subs, published,
                                          f"{r}w{k}x{subs}")  # fmt: skip
                    for k, (who, cases) in enumerate(versus.in_turn(workers, r)):
                        with versus.worker(the_bus, who):
                            steady(the_bus, sink, plan, runs[who.label], f"{r}w{k}", cases)
                drops = the_bus.dropped()
        finally:
            with contextlib.suppress(OSError):
                sink.stop()
    spent, took = common.others_since(snap), time.perf_counter() - started
    others = f"They used {spent:.1f} CPU-seconds during the benchmark's {took:.0f} s."
    command = COMMAND + (" --quick" if plan is QUICK else "")
    if args.baseline != engines.BASELINE:
        command += f" --baseline {args.baseline}"
    common.write_report("delivery", report(command, plan, list(runs.values()), drops, others))
    keep_figures(*(runs[who.label] for who, _ in workers))


def saturated(the_bus: Bus, sink: Sink, into: Runs, subs: int, published: int, tag: str) -> None:
    """One throughput run with the worker running, after a warm-up."""
    throughput(the_bus, sink, 1, 5_000, f"warm{tag}")  # connections, imports, scripts
    into.tp[subs].append(throughput(the_bus, sink, subs, published, tag))
    print(f"{into.who.label} {tag} throughput {subs}: {brief(into.tp[subs][-1])}", flush=True)


def steady(the_bus: Bus, sink: Sink, plan: Plan, into: Runs, tag: str, cases: list[str]) -> None:
    """One round of the latency `cases` with the worker running."""
    throughput(the_bus, sink, 1, 5_000, f"warm{tag}")
    for i, (case, spec) in enumerate(plan.latency.items()):
        if case not in cases:
            continue
        into.lat[case].append(latency(the_bus, sink, f"{tag}l{i}", spec, plan.seconds))
        print(f"{into.who.label} {tag} latency {case}: {brief(into.lat[case][-1])}", flush=True)


def brief(run: dict[str, Any]) -> dict[str, Any]:
    """A run's figures for the progress line, without its raw samples."""
    return {k: v for k, v in run.items() if k != "raw_all"}


def keep_figures(base: Runs, ours: Runs, equal: Runs | None = None) -> None:
    """Latency CDFs of this tree's worker (raw, publish -> receive) and the headline
    figures: this tree's, and its ratio to the baseline's, round by round (and at the
    thread engine's concurrency, when the baseline is the thread engine)."""
    series = {f"throughput, {n} sub(s) (saturated)": runs for n, runs in ours.tp.items()}
    series |= {f"steady, {case}": runs for case, runs in ours.lat.items()}
    common.write_samples(
        "delivery", {k: [x for r in runs for x in r["raw_all"]] for k, runs in series.items()}
    )
    rows = []
    rev = base.who.label.split()[1]
    for n in ours.tp:
        rate, old = ([r["rate"] for r in x.tp[n]] for x in (ours, base))
        versus_base = (f"the same, this tree / baseline {rev}", f"{versus.ratio(rate, old)}x")
        if equal is not None:
            same = [r["rate"] for r in equal.tp[n]]
            versus_base = (f"{versus_base[0]}: defaults (equal, {versus.BASELINE_THREADS} "
                           f"each)", f"{versus_base[1]} ({versus.ratio(same, old)}x)")  # fmt: skip
        rows += [(f"delivered events/s, {n} subscriber(s)", common.spread(rate)), versus_base]
    for case, runs in ours.lat.items():
        if case.startswith("1 sub, max 100"):
            added = [r["added"][0] for r in runs]
            rows.append((f"added latency p50 ms, {case}", common.spread(added, "{:.1f}")))
    common.write_headlines("delivery", rows)


if __name__ == "__main__":
    main()
