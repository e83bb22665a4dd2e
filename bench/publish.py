"""Publish throughput against the framework floor, on real processes, in one run.

One `busbar web` (gunicorn gthread + Flask) on a real valkey-server, with one subscriber
so events are really queued, takes three loads, interleaved per round so drift hits each
alike: GET /health (no auth, no Redis: the floor of the same stack), one-event publish,
and 500-event bulk publish. Each client thread keeps one connection alive, as publishers
do, and runs on the same cores as gunicorn and valkey: the CPU column shows the split.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import common
from spec.integration.processes import children_of, wait_until

EVENT = {"type": "create", "url": "https://example.com/orders/1", "data": {"id": 1}}
BULK = 500
DISTURBED = 0.15  # cores used by other processes during a load that make a round suspect
SUBSCRIPTION = {"topics": ["bench", "bench_bulk"], "callback": "https://example.com/in",
                "max": 100, "timeout": 500}  # fmt: skip
QUICK = ["--seconds", "1", "--rounds", "1", "--configs", "2x8", "--retries", "0"]


@dataclass(frozen=True)
class Load:
    """What one measurement sends; `expect` is the only status it accepts."""

    name: str
    method: str
    path: str
    token: str | None
    bodies: Sequence[bytes | None]  # one per client thread
    per_request: int  # events per request: 1 for the floor and single publish
    expect: int


@dataclass(frozen=True)
class Sample:
    """One timed load: events per second, latency percentiles in ms, cores used per role."""

    rate: float
    p50: float
    p99: float
    cpu: dict[str, float]
    latencies: list[float]


def usage(pids: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds so far per role (gunicorn's workers, not its idle master), this client,
    and the whole machine (`busy`), so that what anything else took shows too."""
    roles = {r: sum(common.cpu_seconds(p, tree=False) for p in g) for r, g in pids.items()}
    return {"client": time.process_time(), "busy": common.busy_seconds()} | roles


def headers(token: str | None) -> dict[str, str]:
    """Routemaster's Basic scheme: the token is the username, the password is empty."""
    auth = {"Authorization": "Basic " + base64.b64encode(f"{token}:".encode()).decode()}
    return {"Content-Type": "application/json"} | (auth if token else {})


def run_load(port: int, load: Load, seconds: float, pids: dict[str, list[int]]) -> Sample:
    """Each thread holds one keep-alive connection; any unexpected status fails the run."""
    latencies: list[list[float]] = [[] for _ in load.bodies]
    errors: list[str] = []
    start = threading.Barrier(len(load.bodies) + 1)
    sent = headers(load.token)

    def client(index: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine, body = latencies[index], load.bodies[index]
        try:
            conn.connect()
            start.wait()
            deadline = time.perf_counter() + seconds
            while (t0 := time.perf_counter()) < deadline:
                conn.request(load.method, load.path, body, sent)
                response = conn.getresponse()
                payload = response.read()
                mine.append((time.perf_counter() - t0) * 1000)
                if response.status != load.expect:
                    errors.append(f"{response.status} {payload[:200]!r}")
        except (OSError, http.client.HTTPException, threading.BrokenBarrierError) as exc:
            errors.append(repr(exc))
            start.abort()
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(load.bodies))]
    for thread in threads:
        thread.start()
    before = usage(pids)
    with contextlib.suppress(threading.BrokenBarrierError):  # a client failed: see errors
        start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    after = usage(pids)
    if errors:
        raise RuntimeError(f"{load.name}: {len(errors)} failed requests, first: {errors[0]}")
    flat = sorted(x for chunk in latencies for x in chunk)
    cpu = {role: (after[role] - before[role]) / elapsed for role in after}
    cpu["other"] = max(0.0, cpu.pop("busy") - sum(cpu.values()))  # what else ran meanwhile
    n = len(flat)
    rate = n * load.per_request / elapsed
    return Sample(rate, flat[n // 2], flat[n * 99 // 100], cpu, flat)


def loads(clients: int) -> list[Load]:
    """Floor, publish, bulk; bodies encoded once, so the client spends little CPU on them."""
    one = json.dumps(EVENT).encode()
    urls = [[f"https://example.com/orders/{c}-{i}" for i in range(BULK)] for c in range(clients)]
    bulk = [json.dumps([EVENT | {"url": u} for u in mine]).encode() for mine in urls]
    return [
        Load("floor GET /health", "GET", "/health", None, [None] * clients, 1, 200),
        Load("publish 1 event", "POST", "/topics/bench", "pub", [one] * clients, 1, 204),
        Load(f"bulk {BULK} events", "POST", "/topics/bench_bulk", "pub", bulk, BULK, 204),
    ]


def measure(config: str, args: argparse.Namespace) -> tuple[list[str], list[Sample]]:
    """All rounds of one gunicorn shape (WORKERSxTHREADS) on a fresh valkey; returns its
    table rows and the samples of every round, loads in plan order."""
    workers, threads = (int(n) for n in config.split("x"))
    shape = {"BUSBAR_WEB_WORKERS": str(workers), "BUSBAR_WEB_THREADS": str(threads)}
    with common.web_bus(args.work / config, **shape) as the_bus:
        web = the_bus.pids["web"]
        wait_until(lambda: len(children_of(web)) >= workers, what="gunicorn's workers")
        the_bus.client("pub").close()
        with contextlib.closing(the_bus.client("sub")) as sub:
            sub.ok("POST", "/subscription", SUBSCRIPTION)
        roles = {"web": sorted(children_of(web)), "redis": [the_bus.pids["redis"]]}
        plan = loads(args.clients)
        for load in plan:  # warm-up: imports, script cache, Redis connection pools
            run_load(the_bus.port, load, 0.5, roles)
        rounds: list[list[Sample]] = []
        while len(rounds) < args.rounds:
            common.wait_quiet()
            one = [run_load(the_bus.port, x, args.seconds, roles) for x in plan]
            if max(s.cpu["other"] for s in one) > DISTURBED and args.retries > 0:
                args.retries -= 1  # another job took CPU: run this round again
                continue
            rounds.append(one)
    rows = []
    for i, load in enumerate(plan):
        samples = [r[i] for r in rounds]
        ratio = common.spread([r[1].rate / r[0].rate for r in rounds], "{:.2f}") if i == 1 else ""
        cpu = {k: statistics.median(s.cpu[k] for s in samples) for k in samples[0].cpu}
        unit = "req/s" if load.per_request == 1 else "events/s"
        rows.append(
            f"| {config} | {load.name} | {common.spread([s.rate for s in samples])} {unit} "
            f"| {common.spread([s.p50 for s in samples], '{:.2f}')} "
            f"| {common.spread([s.p99 for s in samples], '{:.2f}')} | {ratio} "
            f"| {' / '.join(f'{cpu[k]:.2f}' for k in ('web', 'redis', 'client', 'other'))} |"
        )
    return rows, [s for r in rounds for s in r]


def keep_figures(config: str, plan: list[Load], samples: list[Sample]) -> None:
    """Latency CDFs and the headline ratio of the first (default) gunicorn shape."""
    by_load = {load.name: samples[i :: len(plan)] for i, load in enumerate(plan)}
    common.write_samples(
        "publish",
        {f"{config} {k}": [x for s in v for x in s.latencies] for k, v in by_load.items()},
    )
    floor, single, bulk = by_load.values()
    common.write_headlines("publish", [
        (f"publish 1 event, req/s ({config})", common.spread([s.rate for s in single])),
        (f"publish / framework floor ({config})",
         common.spread([s.rate / f.rate for s, f in zip(single, floor, strict=True)], "{:.2f}")),
        (f"bulk {BULK}, events/s ({config})", common.spread([s.rate for s in bulk])),
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Run every gunicorn shape, each on its own valkey, write the report; always clean up."""
    parser = argparse.ArgumentParser(prog="bench.publish", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per load per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8, help="client threads")
    parser.add_argument("--configs", default="2x8,2x4,3x2", help="WORKERSxTHREADS,...")
    parser.add_argument("--retries", type=int, default=3, help="re-runs of disturbed rounds")
    parser.add_argument("--quick", action="store_true", help="short: " + " ".join(QUICK))
    given = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(given)
    if args.quick:
        args = parser.parse_args([*given, *QUICK])
    retries = args.retries
    command = " ".join([".venv/bin/python -m bench.publish", *given])
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-publish-") as tmp:
        args.work = Path(tmp)
        for n, config in enumerate(args.configs.split(",")):
            more, samples = measure(config, args)
            rows += more
            if n == 0:
                keep_figures(config, loads(1), samples)
    report = "\n".join([
        "# Publish throughput vs. framework floor", "", f"Machine: {common.machine()}", "",
        f"Command: `{command}`", "",
        f"{args.rounds} rounds of {args.seconds:g} s per load, interleaved; {args.clients} "
        "keep-alive client threads sharing the cores with gunicorn and valkey. Config = "
        "BUSBAR_WEB_WORKERS x BUSBAR_WEB_THREADS, each on a fresh valkey with one subscriber "
        "on both topics (no worker delivering: events queue); median (min-max) over rounds; "
        f"ratio per round; CPU = cores used (median); other > {DISTURBED} means something "
        f"else disturbed the run ({retries - args.retries} disturbed round(s) re-run, "
        f"{args.retries} re-runs left).",
        "",
        "| config | load | rate | p50 ms | p99 ms | publish/floor | CPU web/redis/client/other |",
        "|---|---|---|---|---|---|---|", *rows, "",
    ])  # fmt: skip
    common.write_report("publish", report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
