"""Fan-out to many slow subscribers: one event published to a topic that 1,000
subscribers follow, each answering in 50 ms, on one `busbar worker` with default
settings. How long until every subscriber has it, and what the worker spends on 1,000
deliveries at once (CPU, memory).

Subscriptions use `timeout: 0`, so every batch is due at once: the figures are the
worker's, not the batching wait's (with the default 500 ms timeout, add it). The
subscriber is one process (bench.sink.SlowSink) answering every request after 50 ms.

    .venv/bin/python -m bench.fanout [--quick]
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import common
from bench.sink import SlowSink
from config.settings import Settings

COMMAND = ".venv/bin/python -m bench.fanout"
ANSWER_S = 0.05
ENV = {"BUSBAR_REDIS_MAX_MEM": str(1 << 30)}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def subscribe_all(the_bus: common.Bus, sink: SlowSink, count: int) -> None:
    """`count` clients subscribed to `fan`, each with its own callback path."""
    with contextlib.closing(the_bus.api()) as root:
        for i in range(count):
            root.ok("POST", "/api_tokens", {"name": f"f{i}", "token": f"f{i}"})
    for i in range(count):
        with contextlib.closing(the_bus.api(f"f{i}")) as api:
            body = {"topics": ["fan"], "callback": f"http://127.0.0.1:{sink.port}/f{i}",
                    "timeout": 0}  # fmt: skip
            api.ok("POST", "/subscription", body)


def one_round(the_bus: common.Bus, sink: SlowSink, count: int) -> dict[str, Any]:
    """Publish one event; times (ms after the publish's answer) of every arrival."""
    sink.take()
    start = sink.received
    worker = the_bus.pids["worker"]
    peak = [rss_kib(worker)]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.02):
            peak.append(rss_kib(worker))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    others = {"redis": [p for n, p in the_bus.pids.items() if n.startswith("redis")],
              "subscriber": [sink.process.pid]}  # fmt: skip
    cpu0 = common.cpu_seconds(worker)
    others0 = {k: sum(common.cpu_seconds(p) for p in pids) for k, pids in others.items()}
    with contextlib.closing(the_bus.api("pub")) as pub:
        sent = time.time() * 1000
        pub.ok("POST", "/topics/fan", {"type": "create", "url": "https://o.test/1",
                                       "data": {"s": sent}})  # fmt: skip
    complete = sink.wait_for(start + count, 120)
    done.set()
    watcher.join()
    cpu = common.cpu_seconds(worker) - cpu0
    spent = {k: sum(common.cpu_seconds(p) for p in pids) - others0[k] for k, pids in others.items()}
    arrivals = sorted(at - sent for at, _, _ in sink.take())
    return {
        "complete": complete and len(arrivals) == count,
        "p50": common.pct(arrivals, 50),
        "p99": common.pct(arrivals, 99),
        "max": arrivals[-1] if arrivals else 0.0,
        "cpu_ms": cpu * 1000,
        "redis_cpu_ms": spent["redis"] * 1000,
        "sink_cpu_ms": spent["subscriber"] * 1000,
        "rss_kib": peak[0],
        "rss_peak_kib": max(peak),
        "samples": arrivals,
    }


def report(
    command: str, rows: dict[str, list[dict[str, Any]]], cold: dict[str, dict], count: int
) -> str:
    lines = [
        "# Fan-out to many slow subscribers",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        f"One event published to a topic {count:,} subscribers follow (`timeout: 0`, so "
        f"every batch is due at once), each answering in {ANSWER_S * 1000:.0f} ms; one "
        "`busbar worker`, default settings but for the delivery threads of each row. "
        "Times are from the publish's answer to each subscriber's receipt, median "
        "(min-max) over rounds of a worker that has delivered a fan-out before (its "
        "keep-alive connections open); the first fan-out after the worker starts, which "
        "opens them, is the column before last. CPU for the whole fan-out: the worker's, "
        "Redis's, and the subscribers' (one local process serving all 1,000, on the same "
        "2 cores: in production they are elsewhere). Memory: the worker's RSS before the "
        "publish and its peak.",
        "",
        "| delivery threads | every subscriber has it: p50 | p99 | last | worker CPU "
        "| Redis CPU | subscribers' CPU | first after start: p99 | worker RSS before "
        "| peak |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for threads, runs in rows.items():

        def col(key: str, scale: float = 1.0, runs: list = runs) -> str:
            return common.spread([r[key] * scale for r in runs], "{:,.0f}")

        lines.append(
            f"| {threads} | {col('p50')} ms | {col('p99')} ms | {col('max')} ms "
            f"| {col('cpu_ms')} ms | {col('redis_cpu_ms')} ms | {col('sink_cpu_ms')} ms "
            f"| {cold[threads]['p99']:,.0f} ms "
            f"| {col('rss_kib', 1 / 1024)} MiB | {col('rss_peak_kib', 1 / 1024)} MiB |"
        )
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> None:
    quick = common.quick_flag("bench.fanout", __doc__, argv)
    count, rounds = (200, 1) if quick else (1000, 3)
    default = Settings().worker_threads
    counts = [default] if quick else sorted({5, 32, 64, 96, 128, default, 256})
    rows: dict[str, list[dict[str, Any]]] = {}
    cold: dict[str, dict[str, Any]] = {}
    sink = SlowSink(ANSWER_S)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="busbar-bench-") as work,
            common.web_bus(Path(work), **ENV) as the_bus,
        ):
            the_bus.client("pub").close()
            subscribe_all(the_bus, sink, count)
            base = dict(the_bus.env)
            for threads in counts:
                the_bus.env = {**base, "BUSBAR_WORKER_THREADS": str(threads)}
                label = f"{threads}" + (" (default)" if threads == default else "")
                with common.worker(the_bus):
                    time.sleep(1)  # its threads have settled in
                    for r in range(rounds + 1):  # round 0 opens the connections
                        common.wait_quiet()
                        result = one_round(the_bus, sink, count)
                        if r == 0:
                            cold[label] = result
                        else:
                            rows.setdefault(label, []).append(result)
                        brief = {k: v for k, v in result.items() if k != "samples"}
                        print(f"{label} round {r}: {brief}", flush=True)
    finally:
        sink.stop()
    if not all(r["complete"] for runs in [*rows.values(), cold.values()] for r in runs):
        raise RuntimeError("a fan-out did not reach every subscriber within 120 s")
    command = COMMAND + (" --quick" if quick else "")
    common.write_report("fanout", report(command, rows, cold, count))
    chosen = rows[f"{default} (default)"]
    common.write_samples("fanout", {
        f"{label} threads": [x for r in runs for x in r["samples"]] for label, runs in rows.items()
    })  # fmt: skip
    common.write_headlines("fanout", [
        (f"{count} subscribers x 50 ms, default threads: every one has it, p99",
         common.spread([r["p99"] for r in chosen], "{:,.0f}") + " ms"),
        ("the same, first fan-out after the worker starts",
         f"{cold[f'{default} (default)']['p99']:,.0f} ms"),
        ("worker CPU for the fan-out (1,000 deliveries)",
         common.spread([r["cpu_ms"] for r in chosen], "{:,.0f}") + " ms"),
        ("worker RSS peak",
         common.spread([r["rss_peak_kib"] / 1024 for r in chosen], "{:.0f}") + " MiB"),
    ])  # fmt: skip
    print(f"median p99 {statistics.median(r['p99'] for r in chosen):.0f} ms")


if __name__ == "__main__":
    main()
