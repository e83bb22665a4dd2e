"""Publish throughput against the framework floor, on real processes, in one run.

One `busbar web` (gunicorn, per worker class and shape, the Flask app) on a real
valkey-server, with one subscriber so events are really queued, takes three loads: GET
/health (no auth, no Redis: the floor of the same stack), one-event publish and
500-event bulk publish. Each load is driven by two load generators, Python client
threads and wrk (bench/loadgen.py), all interleaved per round so drift hits each alike,
every process on the same cores: the CPU columns show the split, and what each
generator costs per request. Then where a publish's CPU goes, piece by piece
(bench/publish_profile.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from pathlib import Path

from bench import common, loadgen, publish_profile, publish_report, wrk
from bench.loadgen import Load, Sample
from spec.integration.processes import children_of, wait_until

EVENT = {"type": "create", "url": "https://example.com/orders/1", "data": {"id": 1}}
BULK = 500
DISTURBED = 0.15  # cores used by other processes during a load that make a round suspect
SUBSCRIPTION = {"topics": ["bench", "bench_bulk"], "callback": "https://example.com/in",
                "max": 100, "timeout": 500}  # fmt: skip
QUICK = ["--seconds", "1", "--rounds", "1", "--configs", "gevent:2", "--retries", "0"]
Round = dict[str, list[Sample]]  # generator: a sample per load, in plan order


def loads(n: int, size: int = BULK) -> list[Load]:
    """Floor, publish, bulk of `size` events; bodies encoded once, so the client spends
    little CPU on them."""
    one = json.dumps(EVENT).encode()
    urls = [[f"https://example.com/orders/{c}-{i}" for i in range(size)] for c in range(n)]
    bulk = [json.dumps([EVENT | {"url": u} for u in mine]).encode() for mine in urls]
    return [
        Load("floor GET /health", "GET", "/health", None, [None] * n, 1, 200),
        Load("publish 1 event", "POST", "/topics/bench", "pub", [one] * n, 1, 204),
        Load(f"bulk {size} events", "POST", "/topics/bench_bulk", "pub", bulk, size, 204),
    ]


def published(the_bus: common.Bus, load: Load) -> int:
    """Events the topic has accepted so far (its counter), 0 for a load that publishes
    nothing: wrk only counts statuses, this shows its 204s really queued events."""
    if load.method != "POST":
        return 0
    with contextlib.closing(the_bus.redis()) as client:
        counted = client.hget(the_bus.keys.topic(load.path.rsplit("/", 1)[1]), "counter")
    return int(counted or 0)


def run_checked(the_bus: common.Bus, gen: str, load: Load, seconds: float, roles: dict) -> Sample:
    before = published(the_bus, load)
    sample = loadgen.RUNNERS[gen](the_bus.port, load, seconds, roles)
    events = published(the_bus, load) - before
    if load.method == "POST" and events < sample.request_rate * seconds * 0.9 * load.per_request:
        raise RuntimeError(f"{load.name} ({gen}): only {events} events counted by the topic")
    return sample


def shape(config: str) -> dict[str, str]:
    """`gevent:2` (worker class : processes) or `gthread:2x8` (processes x threads) as
    the settings that make it; a bare `2x8` is gthread, as before the worker class was
    a setting."""
    worker_class, _, size = config.rpartition(":")
    worker_class = worker_class or "gthread"
    workers, _, threads = size.partition("x")
    env = {"BUSBAR_WEB_WORKER_CLASS": worker_class, "BUSBAR_WEB_WORKERS": workers}
    return env | ({"BUSBAR_WEB_THREADS": threads} if threads else {})


def measure(config: str, args: argparse.Namespace) -> list[Round]:
    """Every round of one gunicorn shape on a fresh valkey."""
    env = shape(config)
    workers = int(env["BUSBAR_WEB_WORKERS"])
    with common.web_bus(args.work / config.replace(":", "-"), env=env) as the_bus:
        web = the_bus.pids["web"]
        wait_until(lambda: len(children_of(web)) >= workers, what="gunicorn's workers")
        the_bus.client("pub").close()
        with contextlib.closing(the_bus.client("sub")) as sub:
            sub.ok("POST", "/subscription", SUBSCRIPTION)
        roles = {"web": sorted(children_of(web)), "redis": [the_bus.pids["redis"]]}
        plan = loads(args.connections)
        for gen in args.generators:  # warm-up: imports, script cache, Redis connection pools
            for load in plan:
                run_checked(the_bus, gen, load, 1.0, roles)
        rounds: list[Round] = []
        while len(rounds) < args.rounds:
            common.wait_quiet()
            one = {
                gen: [run_checked(the_bus, gen, x, args.seconds, roles) for x in plan]
                for gen in args.generators
            }
            disturbed = max(s.cpu["other"] for samples in one.values() for s in samples)
            if disturbed > DISTURBED and args.retries > 0:
                args.retries -= 1  # another job took CPU: run this round again
                continue
            rounds.append(one)
    return rounds


def main(argv: list[str] | None = None) -> int:
    """Run every gunicorn shape, each on its own valkey, write the report; always clean up."""
    parser = argparse.ArgumentParser(prog="bench.publish", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per load per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=8, help="keep-alive connections")
    parser.add_argument(
        "--configs",
        default="gevent:2,gthread:2x8,gevent:3",
        help="CLASS:WORKERS (gevent) or CLASS:WORKERSxTHREADS (gthread),...",
    )
    parser.add_argument("--generators", default=",".join(loadgen.GENERATORS),
                        help="load generators, of: " + ", ".join(loadgen.GENERATORS))  # fmt: skip
    parser.add_argument("--retries", type=int, default=3, help="re-runs of disturbed rounds")
    parser.add_argument("--quick", action="store_true", help="short: " + " ".join(QUICK))
    given = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(given)
    if args.quick:
        args = parser.parse_args([*given, *QUICK])
    args.generators = [g for g in args.generators.split(",") if g]
    if unknown := set(args.generators) - set(loadgen.GENERATORS):
        parser.error(f"unknown generator(s): {', '.join(sorted(unknown))}")
    if "wrk" in args.generators and not wrk.available():
        print(f"bench.publish: {wrk.MISSING}", file=sys.stderr)
        return 2
    retries = args.retries
    measured: dict[str, list[Round]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-publish-") as tmp:
        args.work = Path(tmp)
        for config in args.configs.split(","):
            measured[config] = measure(config, args)
        common.wait_quiet()
        pieces = publish_profile.measure(args.work)
    command = " ".join([".venv/bin/python -m bench.publish", *given])
    rerun = retries - args.retries
    publish_report.write(measured, pieces, loads(1), args, command, rerun, DISTURBED)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
