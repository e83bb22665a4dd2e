"""Isolation: a few healthy subscribers beside many "black holes" (endpoints that accept
a request and never answer). A delivery waiting on a hole held a thread for
BUSBAR_TIMEOUT in the thread engine, so enough holes stalled everyone; in the asyncio
engine it holds a socket. Measured: how late the healthy subscribers' events arrive.

One `busbar web` and one `busbar worker` with product defaults, a real Redis, and one
bench.asyncsink process serving everyone. `--healthy` subscribers (`max: 1,
timeout: 0`, answering at once) share a topic published every 100 ms for `--seconds`;
`--holes` subscribers (`timeout: 0`) share a topic published every second meanwhile,
so they always have a batch due. Added latency: arrival at the subscriber less the
publish's answer. The baseline worker (the thread engine, a git worktree under var/)
and this tree's run in the same run, each on a fresh Redis, web and subscriber.

    .venv/bin/python -m bench.isolation [--quick] [--holes 300] [--seconds 40]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import common, engines
from bench.asyncsink import AsyncSink

COMMAND = ".venv/bin/python -m bench.isolation"
HOLES, HEALTHY, SECONDS, SETTLE = 300, 5, 40, 60
# the one sink process stands for each subscriber's own server: no bound per origin
ENV = {"BUSBAR_REDIS_MAX_MEM": str(1 << 30), "BUSBAR_ORIGIN_CONNECTIONS": "100000",
       "BUSBAR_ORIGIN_CONNECTING": "10000"}  # fmt: skip


def publish(api: common.Api, topic: str, i: int, data: dict | None = None) -> None:
    event = {"type": "create", "url": f"https://o.test/{i}", **({"data": data} if data else {})}
    api.ok("POST", f"/topics/{topic}", event)


def scenario(args: argparse.Namespace, code: Path | None) -> dict[str, Any]:
    """One worker's run on a bus of its own: the healthy events' latencies and counts."""
    sink = AsyncSink([("/hole/", None)])  # every other path answers at once
    answered: dict[int, float] = {}
    try:
        with (
            tempfile.TemporaryDirectory(prefix="busbar-bench-") as work,
            common.web_bus(Path(work), env=ENV) as the_bus,
        ):
            the_bus.client("pub").close()
            url = f"http://127.0.0.1:{sink.port}"
            engines.subscribe_many(the_bus, [
                *[(f"ok{i}", {"topics": ["calm"], "callback": f"{url}/ok/{i}", "max": 1,
                              "timeout": 0}) for i in range(args.healthy)],
                *[(f"hole{i}", {"topics": ["hole"], "callback": f"{url}/hole/{i}",
                                "timeout": 0}) for i in range(args.holes)],
            ])  # fmt: skip
            with engines.worker(the_bus, code) as process:
                result = measure(args, the_bus, sink, process.pid, answered)
                result["tried"] = tried(the_bus, args.holes)
    finally:
        sink.stop()
    records, stopped = result.pop("records"), result.pop("stopped")
    firsts: dict[tuple[str, int], float] = {}
    for at, path, stamps in records:
        for i, _sent in stamps:
            firsts.setdefault((path, i), at)  # counted once, were it delivered twice
    lags = sorted(at - answered[i] for (_, i), at in firsts.items())
    return result | {
        "published": len(answered) * args.healthy,
        "by_stop": sum(1 for at in firsts.values() if at <= stopped),
        "by_settle": len(firsts),
        "lags": lags,
    }


def tried(the_bus: common.Bus, holes: int) -> int:
    """Holes whose delivery was begun at least once (their subscriber's last_attempted_at)."""
    with the_bus.redis() as client:
        pipe = client.pipeline(transaction=False)
        for i in range(holes):
            pipe.hget(the_bus.keys.subscriber(f"hole{i}"), "last_attempted_at")
        return sum(1 for at in pipe.execute() if at)


def measure(
    args: argparse.Namespace, the_bus: common.Bus, sink: AsyncSink, pid: int,
    answered: dict[int, float],
) -> dict[str, Any]:  # fmt: skip
    """Publish both topics, then collect the healthy subscribers' records."""
    rss = engines.PeakRss(pid)
    going = threading.Event()
    going.set()
    holes = threading.Thread(target=common.paced, daemon=True, args=(
        1.0, lambda: the_bus.api("pub"), lambda api, i: publish(api, "hole", i),
    ), kwargs={"going": going.is_set})  # fmt: skip
    holes.start()
    time.sleep(1.0)  # the holes have their first batches in flight
    cpu0, others0 = common.cpu_seconds(pid), common.others()

    def calm(api: common.Api, i: int) -> None:
        publish(api, "calm", i, {"s": [i, round(time.time() * 1000)]})
        answered[i] = time.time() * 1000

    late = common.paced(10.0, lambda: the_bus.api("pub"), calm, args.seconds * 10)
    stopped = time.time() * 1000
    going.clear()
    cpu, noise = common.cpu_seconds(pid) - cpu0, common.others_since(others0)
    want, deadline = len(answered) * args.healthy, stopped + args.settle * 1000
    records: list[common.Record] = []
    held = 0
    while time.time() * 1000 < deadline:  # until every one came, or --settle s
        records += [r for r in sink.take() if r[1].startswith("/ok/")]
        held = max(held, sink.stats()["peak_holding"])
        if len(records) >= want:
            break
        time.sleep(0.5)
    holes.join()
    rss.stop()
    return {
        "records": records,
        "stopped": stopped,
        "held": held,
        "cpu_s": cpu,
        "rss_mib": rss.peak / 1024,
        "late_ms": max(late) * 1000 if late else 0.0,
        "others_s": noise,
    }


def report(args: argparse.Namespace, rows: dict[str, dict[str, Any]], command: str) -> str:
    lines = [
        f"# Isolation: {args.healthy} healthy subscribers beside {args.holes:,} black holes",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        f"{args.holes:,} subscribers whose endpoint reads each request and never answers "
        f"(their topic published every second) beside {args.healthy} healthy ones "
        "(`max: 1, timeout: 0`, answering at once) that get one event every 100 ms each "
        f"for {args.seconds} s; one `busbar web`, one `busbar worker` with product "
        "defaults (BUSBAR_TIMEOUT 20 s: a hole holds its delivery that long), one "
        f"subscriber process on {engines.loop_name()} serving all, every process on the "
        "same 2 cores. Latency: arrival at the subscriber less the publish's answer, for "
        f"the events that arrived (within {args.settle} s of the last publish). Holes held: "
        "requests the holes held at once, at peak; holes tried: holes whose delivery "
        "began at least once by the end. One run each, baseline first.",
        "",
        "| worker | concurrency | healthy events arrived while publishing | "
        f"within {args.settle} s after | added latency p50 | p99 | max | holes held "
        "| holes tried | worker CPU | worker RSS peak | others' CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, r in rows.items():
        lags = r["lags"]
        at = [f"{common.pct(lags, q):,.0f} ms" if lags else "none came" for q in (50, 99, 100)]
        lines.append(
            f"| {label} | {r['concurrency']} | {r['by_stop']:,} of {r['published']:,} "
            f"| {r['by_settle']:,} | {at[0]} | {at[1]} | {at[2]} | {r['held']:,} "
            f"| {r['tried']:,} of {args.holes:,} "
            f"| {r['cpu_s']:.1f} s | {r['rss_mib']:.0f} MiB | {r['others_s']:.1f} s |"
        )
    worst = max(r["late_ms"] for r in rows.values())
    lines += ["", f"The publisher kept its pace: at worst {worst:,.0f} ms behind.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.isolation", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short run, for a smoke check")
    parser.add_argument("--holes", type=int, default=HOLES, help="black-hole subscribers")
    parser.add_argument("--healthy", type=int, default=HEALTHY, help="healthy subscribers")
    parser.add_argument("--seconds", type=int, default=SECONDS, help="publishing time")
    parser.add_argument("--settle", type=int, default=SETTLE, help="seconds allowed after")
    parser.add_argument("--baseline", default=engines.BASELINE, help="commit to compare with")
    args = parser.parse_args(argv)
    name = "isolation" if args.holes == HOLES else f"isolation{args.holes}"
    shown = [f"--holes {args.holes}"] if args.holes != HOLES else []
    if args.quick:
        args.holes, args.seconds, args.settle = min(max(1, args.holes // 2), 1000), 8, 15
        shown.append("--quick")
    command = " ".join([COMMAND, *shown])
    rows: dict[str, dict[str, Any]] = {}
    for label, code in engines.variants(args.baseline).items():
        common.wait_quiet()
        rows[label] = scenario(args, code) | {"concurrency": engines.concurrency(code)}
        brief = {k: v for k, v in rows[label].items() if k != "lags"}
        print(f"{label}: {brief}", flush=True)
    common.write_report(name, report(args, rows, command))
    common.write_samples(name, {f"{label}": r["lags"] for label, r in rows.items()})
    common.write_headlines(name, [
        (f"{label}: healthy p99 beside {args.holes:,} holes, arrived within "
         f"{args.settle} s", (f"{common.pct(r['lags'], 99):,.0f} ms, " if r["lags"] else "")
         + f"{r['by_settle']:,} of {r['published']:,}")
        for label, r in rows.items()
    ])  # fmt: skip


if __name__ == "__main__":
    main()
