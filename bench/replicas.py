"""What BUSBAR_REDIS_MIN_REPLICAS=1 costs: the same bus with and without it, in the
same run, on two layouts, every server on this machine, as the bus: one Redis with one
replica, and a Redis Cluster of 3 masters with one replica each (dev/cluster.py, as the
failover tests start it).

Publish: single-event publishes from 8 threads on keep-alive connections to a topic
with one subscriber; each 204 waits for the replicas (a fence write and WAIT on the
web's side, on every master the publish wrote to: one on one Redis, the catalog's and
the subscriber's shard's on the cluster, one or two of the three). Delivery: a backlog
drained by one worker for one subscriber with `max: 1, timeout: 0`, the worst case, one
settle per event: on one Redis each write of the worker's pipe ends with WAIT, on a
cluster every script call goes with WAIT behind it on one connection to its node
(app/lua/replicated.py).
Each layout's servers are started once; on them the two settings take turns round by
round. WAITs are counted (INFO commandstats over every master) to show the round trips
the setting adds, and CPU per publish and per event (web, worker, every Redis process)
to show where the time goes.

    .venv/bin/python -m bench.replicas [--quick]
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from bench import common, serial, versus
from bench.replicas_report import SETTINGS, Rows, ratio, report
from bench.sink import Sink
from dev import cluster as local_cluster
from dev import redis_server

COMMAND = ".venv/bin/python -m bench.replicas"
THREADS = 8
LAYOUTS = {"one Redis": 0, "3-master cluster": 3}  # masters; 0: one server


@dataclass
class Servers:
    """A layout's servers, started once for every round: what web_bus is pointed at."""

    server: tuple[str, int]  # URL, a master's pid
    masters: list[int]  # ports, each flushed before a round (its replica follows)
    pids: list[int]  # every server, masters and replicas: Redis's CPU
    env: dict[str, str] = field(default_factory=dict)  # what busbar needs for the layout

    def cpu(self) -> float:
        return sum(common.cpu_seconds(pid, tree=False) for pid in self.pids)


@contextmanager
def replicated(work: Path, masters: int) -> Iterator[Servers]:
    """One Redis and its replica (masters=0), or a cluster of `masters` masters with one
    replica each, every replica in sync before the first round."""
    if not masters:
        primary = redis_server.start(work / "primary", persistent=False)
        try:
            replica = redis_server.start_replica(primary, work / "replica")
            try:
                pids = [primary.process.pid, replica.process.pid]
                yield Servers((primary.url, primary.process.pid), [primary.port], pids)
            finally:
                replica.stop()
        finally:
            primary.stop()
        return
    nodes = local_cluster.start(work / "cluster", masters, replicas=1, persistent=False)
    try:
        heads, pids = nodes.masters, [n.server.process.pid for n in nodes.nodes]
        server = (nodes.url, heads[0].server.process.pid)
        yield Servers(server, [n.port for n in heads], pids, common.cluster_env(masters))
    finally:
        nodes.stop()


def publishes(the_bus: common.Bus, servers: Servers, per_thread: int) -> dict[str, float]:
    """8 threads of single-event publishes: requests/s, the latency quantiles, the WAITs
    Redis ran and the CPU the web and Redis spent, per publish."""
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
    calls, web, cpu = versus.calls_now(the_bus), the_bus.cpu()["web"], servers.cpu()
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    web, cpu = the_bus.cpu()["web"] - web, servers.cpu() - cpu
    waits = versus.calls_since(the_bus, calls).get("wait", 0)
    return {
        "rate": len(took) / seconds,
        "p50": common.pct([t * 1000 for t in took], 50),
        "p99": common.pct([t * 1000 for t in took], 99),
        "waits": waits / len(took),
        "web_us": web / len(took) * 1e6,
        "redis_us": cpu / len(took) * 1e6,
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
        calls, cpu = versus.calls_now(the_bus), servers.cpu()
        drained = serial.drain(the_bus, sink, sizes[1], None)
        drained["waits"] = versus.calls_since(the_bus, calls).get("wait", 0) / sizes[1]
        drained["redis_us"] = (servers.cpu() - cpu) / sizes[1] * 1e6
        return {**publishes(the_bus, servers, sizes[0]), "drain": drained}


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
    common.write_report("replicas", report(command, THREADS, sizes, runs))
    common.write_headlines("replicas", [
        (f"{what}, on against off, {layout}", ratio(rows, name) + "x")
        for layout, rows in runs.items()
        for what, name in (("publish req/s", "rate"), ("serial drain events/s", "drain.rate"))
    ])  # fmt: skip


if __name__ == "__main__":
    main()
