"""What BUSBAR_REDIS_MIN_REPLICAS=1 costs: the same bus with and without it, in the
same run, on two layouts, every server on this machine, as the bus: one Redis with one
replica, and a Redis Cluster of 3 masters with one replica each (dev/cluster.py, as the
failover tests start it).

Publish: single-event publishes from 8 threads on keep-alive connections; each 204
waits for the replicas (a fence write and WAIT on the web's side, on every master the
bus writes to: one on one Redis, three on the cluster). Delivery: a backlog drained by
one worker for one subscriber with `max: 1, timeout: 0`, the worst case, one settle per
event: on one Redis each write of the worker's pipe ends with WAIT, on a cluster every
script call is followed by a fence write and WAIT on its node (app/lua/replicated.py).
Each layout's servers are started once; on them the two settings take turns round by
round. WAITs are counted (INFO commandstats over every master) to show the round trips
the setting adds.

    .venv/bin/python -m bench.replicas [--quick]
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from bench import common, serial, versus
from bench.sink import Sink
from dev import cluster as local_cluster
from dev import redis_server

COMMAND = ".venv/bin/python -m bench.replicas"
THREADS = 8
SETTINGS = {"off": "0", "on (1 replica)": "1"}
LAYOUTS = {"one Redis": 0, "3-master cluster": 3}  # masters; 0: one server
Rows = dict[str, list[dict[str, Any]]]  # setting: one row per round


@dataclass
class Servers:
    """A layout's servers, started once for every round: what web_bus is pointed at."""

    server: tuple[str, int]  # URL, a master's pid
    masters: list[int]  # ports, each flushed before a round (its replica follows)
    env: dict[str, str] = field(default_factory=dict)  # what busbar needs for the layout


@contextmanager
def replicated(work: Path, masters: int) -> Iterator[Servers]:
    """One Redis and its replica (masters=0), or a cluster of `masters` masters with one
    replica each, every replica in sync before the first round."""
    if not masters:
        primary = redis_server.start(work / "primary", persistent=False)
        try:
            replica = redis_server.start_replica(primary, work / "replica")
            try:
                yield Servers((primary.url, primary.process.pid), [primary.port])
            finally:
                replica.stop()
        finally:
            primary.stop()
        return
    nodes = local_cluster.start(work / "cluster", masters, replicas=1, persistent=False)
    try:
        heads = nodes.masters
        server = (nodes.url, heads[0].server.process.pid)
        yield Servers(server, [n.port for n in heads], common.cluster_env(masters))
    finally:
        nodes.stop()


def publishes(the_bus: common.Bus, per_thread: int) -> dict[str, float]:
    """8 threads of single-event publishes: requests/s, the latency quantiles, and the
    WAITs Redis ran per publish."""
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
    calls = versus.calls_now(the_bus)
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    waits = versus.calls_since(the_bus, calls).get("wait", 0)
    return {
        "rate": len(took) / seconds,
        "p50": common.pct([t * 1000 for t in took], 50),
        "p99": common.pct([t * 1000 for t in took], 99),
        "waits": waits / len(took),
    }


def one_round(
    work: Path, servers: Servers, sink: Sink, wanted: str, sizes: tuple[int, int]
) -> dict[str, Any]:
    for port in servers.masters:
        with redis.Redis(port=port) as client:
            client.flushall()
    work.mkdir(parents=True)
    env = servers.env | {"BUSBAR_REDIS_MIN_REPLICAS": wanted}
    with common.web_bus(work, server=servers.server, env=env) as the_bus:
        serial.subscribe(the_bus, sink)
        calls = versus.calls_now(the_bus)
        drained = serial.drain(the_bus, sink, sizes[1], None)
        drained["waits"] = versus.calls_since(the_bus, calls).get("wait", 0) / sizes[1]
        return {**publishes(the_bus, sizes[0]), "drain": drained}


def main(argv: list[str] | None = None) -> None:
    quick = common.quick_flag("bench.replicas", __doc__, argv)
    sizes, rounds = ((200, 500), 1) if quick else ((1_000, 10_000), 5)
    runs: dict[str, Rows] = {}
    sink = Sink()
    with tempfile.TemporaryDirectory(prefix="busbar-bench-") as tmp:
        try:
            for layout, masters in LAYOUTS.items():
                rows = runs.setdefault(layout, {})
                with replicated(Path(tmp) / f"servers-{masters}", masters) as servers:
                    for r in range(rounds):  # the order turns round: drift hits both
                        for label, wanted in versus.in_turn(list(SETTINGS.items()), r):
                            at = Path(tmp) / f"{masters}-{r}-{wanted}"
                            row = one_round(at, servers, sink, wanted, sizes)
                            rows.setdefault(label, []).append(row)
                            print(f"{layout}, {label}, round {r}: {row}", flush=True)
        finally:
            sink.stop()
    if not all(r["drain"]["complete"] for rows in runs.values() for v in rows.values() for r in v):
        raise RuntimeError("a drain did not deliver every event within 300 s")
    command = COMMAND + (" --quick" if quick else "")
    common.write_report("replicas", report(command, sizes, runs))
    common.write_headlines("replicas", [
        (f"{what}, on against off, {layout}", ratio(rows, value) + "x")
        for layout, rows in runs.items()
        for what, value in (("publish req/s", publish_rate), ("serial drain events/s", drain_rate))
    ])  # fmt: skip


def publish_rate(row: dict[str, Any]) -> float:
    return float(row["rate"])


def drain_rate(row: dict[str, Any]) -> float:
    return float(row["drain"]["rate"])


def ratio(rows: Rows, value: Callable[[dict[str, Any]], float]) -> str:
    """On over off, round by round (each pair ran on the same servers, a minute apart)."""
    on, off = rows["on (1 replica)"], rows["off"]
    return common.spread([value(a) / value(b) for a, b in zip(on, off, strict=True)], "{:.2f}")


def report(command: str, sizes: tuple[int, int], runs: dict[str, Rows]) -> str:
    return "\n".join([
        "# BUSBAR_REDIS_MIN_REPLICAS: its cost",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        "Two layouts, every server on this machine: one Redis with one replica, and a "
        "Redis Cluster of 3 masters with one replica each (6 shards); `busbar web` with "
        f"its defaults. Publish: {THREADS} threads x {sizes[0]:,} single-event publishes "
        f"on keep-alive connections; delivery: a backlog of {sizes[1]:,} events drained "
        "by one `busbar worker` for one subscriber with `max: 1, timeout: 0` (one settle "
        "per event, the worst case). Each layout's servers are started once; on them the "
        "setting off and on take turns, round by round. WAITs: the WAIT commands every "
        "master ran, per publish, and per drained event (the backlog's publishes and the "
        "worker's start and stop included). Median (min-max).",
        "",
        "| layout | BUSBAR_REDIS_MIN_REPLICAS | publish req/s | publish p50 ms "
        "| publish p99 ms | WAITs per publish | serial drain events/s "
        "| WAITs per drained event |",
        "|---|---|---|---|---|---|---|---|",
        *[
            f"| {layout} | {label} | {common.spread([r['rate'] for r in v])} "
            f"| {common.spread([r['p50'] for r in v], '{:.2f}')} "
            f"| {common.spread([r['p99'] for r in v], '{:.2f}')} "
            f"| {common.spread([r['waits'] for r in v], '{:.2f}')} "
            f"| {common.spread([r['drain']['rate'] for r in v])} "
            f"| {common.spread([r['drain']['waits'] for r in v], '{:.2f}')} |"
            for layout, rows in runs.items()
            for label, v in rows.items()
        ],
        "",
        "On against off, round by round:",
        "",
        *[
            f"- {layout}: publish {ratio(rows, publish_rate)}x the rate; serial drain "
            f"{ratio(rows, drain_rate)}x."
            for layout, rows in runs.items()
        ],
        "",
    ])  # fmt: skip


if __name__ == "__main__":
    main()
