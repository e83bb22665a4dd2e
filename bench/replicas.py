"""What BUSBAR_REDIS_MIN_REPLICAS=1 costs: the same bus with and without it, in the
same run, on one Redis with one replica (both on this machine, as the bus).

Publish: single-event publishes from 8 threads on keep-alive connections; each 204
waits for the replica (a fence write and WAIT on the web's side). Delivery: a backlog
drained by one worker for one subscriber with `max: 1, timeout: 0`, the worst case, one
settle per event, each waited for in the worker's pipe. The two settings take turns
round by round, on the same servers.

    .venv/bin/python -m bench.replicas [--quick]
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import redis

from bench import common, serial
from bench.sink import Sink
from dev import redis_server

COMMAND = ".venv/bin/python -m bench.replicas"
THREADS = 8
SETTINGS = {"off": "0", "on (1 replica)": "1"}


def publishes(the_bus: common.Bus, per_thread: int) -> dict[str, float]:
    """8 threads of single-event publishes: requests/s and the latency quantiles."""
    took: list[float] = []
    lock = threading.Lock()

    def run(n: int) -> None:
        with contextlib.closing(the_bus.api("pub")) as api:
            mine = []
            for i in range(per_thread):
                started = time.perf_counter()
                api.ok(
                    "POST", "/topics/load", [{"type": "create", "url": f"https://o.test/{n}/{i}"}]
                )
                mine.append(time.perf_counter() - started)
            with lock:
                took.extend(mine)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(THREADS)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    return {
        "rate": len(took) / seconds,
        "p50": common.pct([t * 1000 for t in took], 50),
        "p99": common.pct([t * 1000 for t in took], 99),
    }


def one_round(
    work: Path, primary: redis_server.RedisServer, sink: Sink, wanted: str, sizes: tuple[int, int]
) -> dict[str, Any]:
    with redis.Redis(port=primary.port) as client:
        client.flushall()
    work.mkdir(parents=True)
    server = (primary.url, primary.process.pid)
    with common.web_bus(work, server=server, env={"BUSBAR_REDIS_MIN_REPLICAS": wanted}) as the_bus:
        serial.subscribe(the_bus, sink)
        drained = serial.drain(the_bus, sink, sizes[1], None)
        return {**publishes(the_bus, sizes[0]), "drain": drained}


def replicated(work: Path) -> tuple[redis_server.RedisServer, redis_server.RedisServer]:
    primary = redis_server.start(work / "primary", persistent=False)
    return primary, redis_server.start_replica(primary, work / "replica")


def main(argv: list[str] | None = None) -> None:
    quick = common.quick_flag("bench.replicas", __doc__, argv)
    sizes, rounds = ((200, 500), 1) if quick else ((1_000, 3_000), 3)
    rows: dict[str, list[dict[str, Any]]] = {}
    sink = Sink()
    with tempfile.TemporaryDirectory(prefix="busbar-bench-") as tmp:
        work = Path(tmp)
        primary, replica = replicated(work)
        try:
            for r in range(rounds):  # the order turns round, so drift on the box hits both
                for label, wanted in list(SETTINGS.items())[:: 1 if r % 2 == 0 else -1]:
                    row = one_round(work / f"{r}-{wanted}", primary, sink, wanted, sizes)
                    rows.setdefault(label, []).append(row)
                    print(f"{label} round {r}: {row}", flush=True)
        finally:
            sink.stop()
            replica.stop()
            primary.stop()
    if not all(row["drain"]["complete"] for runs in rows.values() for row in runs):
        raise RuntimeError("a drain did not deliver every event within 300 s")
    command = COMMAND + (" --quick" if quick else "")
    common.write_report("replicas", report(command, sizes, rows))
    off, on = rows["off"], rows["on (1 replica)"]
    common.write_headlines("replicas", [
        ("publish req/s, on against off", ratio(on, off, lambda r: r["rate"]) + "x"),
        ("serial drain events/s, on against off",
         ratio(on, off, lambda r: r["drain"]["rate"]) + "x"),
    ])  # fmt: skip


def ratio(on: list[dict[str, Any]], off: list[dict[str, Any]], value: Any) -> str:
    return common.spread([value(a) / value(b) for a, b in zip(on, off, strict=True)], "{:.2f}")


def report(command: str, sizes: tuple[int, int], rows: dict[str, list[dict[str, Any]]]) -> str:
    off, on = rows["off"], rows["on (1 replica)"]
    return "\n".join([
        "# BUSBAR_REDIS_MIN_REPLICAS: its cost",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        "One Redis with one replica (both on this machine), `busbar web` with its "
        f"defaults; publish: {THREADS} threads x {sizes[0]:,} single-event publishes on "
        f"keep-alive connections; delivery: a backlog of {sizes[1]:,} events drained by "
        "one `busbar worker` for one subscriber with `max: 1, timeout: 0` (one settle per "
        "event, the worst case). The setting off and on take turns, round by round. "
        "Median (min-max).",
        "",
        "| BUSBAR_REDIS_MIN_REPLICAS | publish req/s | publish p50 ms | publish p99 ms "
        "| serial drain events/s |",
        "|---|---|---|---|---|",
        *[
            f"| {label} | {common.spread([r['rate'] for r in runs])} "
            f"| {common.spread([r['p50'] for r in runs], '{:.2f}')} "
            f"| {common.spread([r['p99'] for r in runs], '{:.2f}')} "
            f"| {common.spread([r['drain']['rate'] for r in runs])} |"
            for label, runs in rows.items()
        ],
        "",
        f"On against off: publish {ratio(on, off, lambda r: r['rate'])}x the rate; "
        f"serial drain {ratio(on, off, lambda r: r['drain']['rate'])}x.",
        "",
    ])  # fmt: skip


if __name__ == "__main__":
    main()
