"""One Redis against a 3-master Redis Cluster, same run, same code, same shards (6).

On each layout: single-event publish to a topic whose subscribers sit on 1 shard and on
all 6 (8 keep-alive clients), bulk publish of 500 events to the 6-shard topic, then a
worker draining a backlog, twice: this tree's worker and the thread engine's (commit
bench.engines.BASELINE, from a worktree under var/), each with its product defaults,
on the same Redis and web and the same backlog, the order turning round each round.
Figures per event and per publish: throughput, web and Redis CPU (Redis = every node's
process), and Redis commands per publish (INFO commandstats over every node: the round
trips a publish costs). Everything shares the same 2 cores, so no speed-up is expected
here: the point is what a cluster costs.

    .venv/bin/python -m bench.cluster [--quick]
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from app.models.keys import Keys
from bench import common, engines, versus
from bench.loadgen import Load, run_python
from bench.sink import Sink
from spec.integration.processes import children_of, wait_until

COMMAND = ".venv/bin/python -m bench.cluster"
SHARDS = 6
CLIENTS = 8
BULK = 500
LAYOUTS = {"one Redis": 0, "3-master cluster": 3}
DRAIN = 20_000  # events published to six subscribers for the worker to deliver
ENV = {"BUSBAR_SHARDS": str(SHARDS), "BUSBAR_REDIS_MAX_MEM": str(2 << 30)}  # no Autodrop


def commands(client: redis.Redis) -> int:
    """Scripts run so far, over every node: a publish is nothing but scripts (the token is
    checked inside the topic step), so these are its round trips. Commandstats also
    counts the commands a script calls, so only EVALSHA itself is taken."""
    return versus.calls(client).get("evalsha", 0)


def one_per_shard(keys: Keys) -> list[str]:
    """Client tokens whose subscribers land on shards 0..SHARDS-1, one each."""
    found: dict[int, str] = {}
    n = 0
    while len(found) < keys.shards:
        found.setdefault(keys.shard_of(f"s{n}"), f"s{n}")
        n += 1
    return [found[s] for s in sorted(found)]


def publish_load(name: str, topic: str, per_request: int, bodies: list[bytes]) -> Load:
    return Load(name, "POST", f"/topics/{topic}", "pub", bodies, per_request, 204)


def measure(
    work: Path, masters: int, seconds: float, drainers: list[versus.Contender]
) -> dict[str, Any]:
    """One layout, one round: the publish loads, then a drain by each of `drainers`, in
    that order, each of the same fresh backlog."""
    found: dict[str, Any] = {}
    sink = Sink()
    with contextlib.ExitStack() as stack:
        stack.callback(sink.stop)
        the_bus = stack.enter_context(common.web_bus(work, masters, env=ENV))
        web = the_bus.pids["web"]
        wait_until(lambda: len(children_of(web)) >= 2, what="gunicorn's workers")
        redis_pids = [pid for name, pid in the_bus.pids.items() if name.startswith("redis")]
        roles = {"web": sorted(children_of(web)), "redis": redis_pids}
        the_bus.client("pub").close()
        tokens = one_per_shard(the_bus.keys)
        for i, token in enumerate(tokens):
            topics = ["wide", "bulk"] + (["narrow"] if i == 0 else [])
            body = {"topics": topics, "callback": f"http://127.0.0.1:{sink.port}/{token}",
                    "max": 100, "timeout": 500}  # fmt: skip
            with contextlib.closing(the_bus.client(token)) as api:
                api.ok("POST", "/subscription", body)
        one = json.dumps({"type": "create", "url": "https://o.test/1", "data": {"id": 1}})
        events = [{"type": "create", "url": f"https://o.test/{i}"} for i in range(BULK)]
        plan = {
            "publish, 1 shard": publish_load("narrow", "narrow", 1, [one.encode()] * CLIENTS),
            "publish, 6 shards": publish_load("wide", "wide", 1, [one.encode()] * CLIENTS),
            "bulk 500, 6 shards": publish_load(
                "bulk", "bulk", BULK, [json.dumps(events).encode()] * CLIENTS
            ),
        }
        with contextlib.closing(the_bus.redis()) as client:
            for load in plan.values():  # warm-up: script caches, connection pools
                run_python(the_bus.port, load, 0.3, roles)
            for name, load in plan.items():
                common.wait_quiet()
                before = commands(client)
                sample = run_python(the_bus.port, load, seconds, roles)
                requests = sample.rate * seconds / load.per_request
                found[name] = {
                    "rate": sample.rate,
                    "p50": sample.p50,
                    "web_us": sample.cpu["web"] / sample.rate * 1e6,
                    "redis_us": sample.cpu["redis"] / sample.rate * 1e6,
                    "commands": (commands(client) - before) / max(requests, 1),
                }
        found["drain"] = {}
        for who in drainers:
            backlog = fresh_backlog(the_bus, sink, tokens)
            found["drain"][who.label] = drain(the_bus, sink, backlog, who)
        found["dropped"] = the_bus.dropped()
    return found


def fresh_backlog(the_bus: common.Bus, sink: Sink, tokens: list[str]) -> int:
    """What the publish loads queued goes (each subscriber is deleted and subscribes
    again, to `drain` only), then DRAIN events are published to all six: the backlog."""
    for token in tokens:
        with contextlib.closing(the_bus.api(token)) as api:
            api.call("DELETE", "/subscriber")
            body = {"topics": ["drain"], "callback": f"http://127.0.0.1:{sink.port}/{token}",
                    "max": 100, "timeout": 500}  # fmt: skip
            api.ok("POST", "/subscription", body)
    events = [{"type": "create", "url": f"https://o.test/{i}"} for i in range(BULK)]
    with contextlib.closing(the_bus.api("pub")) as pub:
        for _ in range(DRAIN // BULK):
            pub.ok("POST", "/topics/drain", events)
    return DRAIN * len(tokens)


def drain(the_bus: common.Bus, sink: Sink, backlog: int, who: versus.Contender) -> dict[str, Any]:
    """`who`'s worker delivers the backlog. Events/s from the worker's start (what a drain
    takes, its start included: 96 threads each learning a cluster's slots is slow) and
    from first to last receipt (the engine's pace alone); CPU per event of the worker
    (once ready) and of Redis; round trips (EVALSHA, BLMOVE) per event."""
    sink.take()
    start_count = sink.received
    common.wait_quiet()
    calls0, cpu0, t0 = versus.calls_now(the_bus), the_bus.cpu(), time.perf_counter()
    with versus.worker(the_bus, who):
        ready = time.perf_counter() - t0
        cpu_worker = common.cpu_seconds(the_bus.pids["worker"])
        if not sink.wait_for(start_count + backlog, 300):
            raise RuntimeError(f"{sink.received - start_count} of {backlog} events delivered")
        elapsed = time.perf_counter() - t0
        cpu1 = the_bus.cpu()
        worker_s = common.cpu_seconds(the_bus.pids["worker"]) - cpu_worker
    used = versus.calls_since(the_bus, calls0)
    got = sink.received - start_count
    arrivals = sorted(at for at, _, _ in sink.take())
    span = (arrivals[-1] - arrivals[0]) / 1000 if len(arrivals) > 1 else 0.0
    redis_s = sum(cpu1[k] - cpu0[k] for k in cpu1 if k.startswith("redis"))
    return {
        "events": got,
        "rate": got / elapsed,
        "steady": got / span if span else 0.0,
        "ready_s": ready,
        "redis_us": redis_s / max(got, 1) * 1e6,
        "worker_us": worker_s / max(got, 1) * 1e6,
        "round_trips": (used.get("evalsha", 0) + used.get("blmove", 0)) / max(got, 1),
        "calls": used,
    }


def report(
    command: str, runs: dict[str, list[dict]], rounds: int, drainers: list[versus.Contender]
) -> str:
    lines = [
        "# One Redis against a 3-master Redis Cluster",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        f"Both layouts with BUSBAR_SHARDS={SHARDS} and the same code: one valkey, or three "
        "valkey masters of a local cluster (dev/cluster.py); `busbar web` (2x8) with "
        f"{CLIENTS} keep-alive clients on the same 2 cores. Subscribers: one per shard "
        "(`publish, 6 shards` reaches all six; `publish, 1 shard` one of them). CPU per "
        "published event, microseconds. "
        "Commands: scripts (EVALSHA) per publish request, over every node: the round trips "
        f"it costs. Median (min-max) of {rounds} round(s).",
        "",
        "| layout | load | rate | p50 ms | web µs/event | Redis µs/event | commands/publish |",
        "|---|---|---|---|---|---|---|",
    ]
    for layout, got in runs.items():
        for load in ("publish, 1 shard", "publish, 6 shards", "bulk 500, 6 shards"):
            rows = [r[load] for r in got]
            unit = "events/s" if "bulk" in load else "req/s"
            lines.append(
                f"| {layout} | {load} | {common.spread([r['rate'] for r in rows])} {unit} "
                f"| {common.spread([r['p50'] for r in rows], '{:.2f}')} "
                f"| {common.spread([r['web_us'] for r in rows], '{:.0f}')} "
                f"| {common.spread([r['redis_us'] for r in rows], '{:.0f}')} "
                f"| {common.spread([r['commands'] for r in rows], '{:.1f}')} |"
            )
    return "\n".join([*lines, "", *drain_report(runs, drainers), ""])


def drain_report(runs: dict[str, list[dict]], drainers: list[versus.Contender]) -> list[str]:
    """The drains: each worker on each layout, then this tree against the baseline."""
    base, ours = drainers
    lines = [
        "## Draining a backlog: this tree's worker against the thread engine",
        "",
        f"A backlog of {DRAIN:,} events for each of 6 subscribers (one per shard, max 100, "
        f"timeout 500; {DRAIN * SHARDS:,} in all), queued with no worker running, then "
        "drained by one `busbar worker`: this tree's, and the baseline's from a worktree "
        "of its commit, on the same Redis and web, each draining the same fresh backlog, "
        "the order turning round each round. Both with the product defaults "
        f"(baseline {base.concurrency}, this tree {ours.concurrency}): with 6 subscribers "
        "at most 6 deliveries are ever in flight, so the concurrency setting only weighs "
        "as a cost (starting, sweeping), which is what a default is judged by. From "
        "start: events over the time from starting the worker process to the last "
        "receipt; ready after: until every shard's pending index names the worker; "
        "steady: events over first to last receipt. Worker CPU from ready on. Round "
        "trips: EVALSHA and BLMOVE over every node during the drain, start and stop "
        "included, per event.",
        "",
        "| layout | worker | events/s from start | events/s steady | ready after s "
        "| worker µs/event | Redis µs/event | round trips/event |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for layout, got in runs.items():
        for who in drainers:
            d = [r["drain"][who.label] for r in got]
            lines.append(
                f"| {layout} | {who.label}, {who.concurrency} "
                f"| {common.spread([x['rate'] for x in d])} "
                f"| {common.spread([x['steady'] for x in d])} "
                f"| {common.spread([x['ready_s'] for x in d], '{:.2f}')} "
                f"| {common.spread([x['worker_us'] for x in d], '{:.0f}')} "
                f"| {common.spread([x['redis_us'] for x in d], '{:.0f}')} "
                f"| {common.spread([x['round_trips'] for x in d], '{:.3f}')} |"
            )
    lines += ["", "This tree against the baseline, round by round, median (min-max):", ""]
    for layout in runs:
        lines.append(
            f"- {layout}: {drain_ratio(runs, layout, drainers, 'rate')} the rate from start, "
            f"{drain_ratio(runs, layout, drainers, 'steady')} steady, "
            f"{drain_ratio(runs, layout, drainers, 'worker_us')} the worker's CPU per event, "
            f"{drain_ratio(runs, layout, drainers, 'redis_us')} Redis's"
        )
    return lines


def drain_ratio(
    runs: dict[str, list[dict]], layout: str, drainers: list[versus.Contender], field: str
) -> str:
    base, ours = drainers
    got = runs[layout]
    return (
        versus.ratio(
            [r["drain"][ours.label][field] for r in got],
            [r["drain"][base.label][field] for r in got],
        )
        + "x"
    )


def main(argv: list[str] | None = None) -> None:
    quick = common.quick_flag("bench.cluster", __doc__, argv)
    seconds, rounds = (1.0, 1) if quick else (5.0, 3)
    runs: dict[str, list[dict]] = {layout: [] for layout in LAYOUTS}
    drainers = list(versus.defaults())
    with tempfile.TemporaryDirectory(prefix="busbar-bench-") as work:
        for r in range(rounds):
            for layout, masters in LAYOUTS.items():
                order = versus.in_turn(drainers, r)
                found = measure(Path(work) / f"{r}-{masters}", masters, seconds, order)
                runs[layout].append(found)
                print(f"round {r} {layout}: {found}", flush=True)
    command = COMMAND + (" --quick" if quick else "")
    common.write_report("cluster", report(command, runs, rounds, drainers))

    def ratio(load: str, field: str) -> str:
        pairs = zip(runs["one Redis"], runs["3-master cluster"], strict=True)
        return common.spread([c[load][field] / s[load][field] for s, c in pairs], "{:.2f}")

    wide = "publish, 6 shards"
    common.write_headlines("cluster", [
        ("cluster / one Redis, single publish to 6 shards, req/s", ratio(wide, "rate")),
        ("cluster / one Redis, Redis CPU per event, 6 shards", ratio(wide, "redis_us")),
        ("commands per publish, cluster, 6 shards",
         common.spread([c["publish, 6 shards"]["commands"] for c in runs["3-master cluster"]],
                       "{:.1f}")),
        *[(f"drain from start, this tree / baseline {engines.BASELINE}, {layout}",
           drain_ratio(runs, layout, drainers, "rate")) for layout in LAYOUTS],
    ])  # fmt: skip


if __name__ == "__main__":
    main()
