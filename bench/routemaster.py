"""busbar's single-event publish side by side with the original Routemaster's, in one run.

Routemaster is Ruby (puma, Sinatra) and not part of this repository, so this benchmark
takes one that is already running (its README: `bundle exec puma` with the Procfile's
settings; docs/web.md says how it was set up here) and a publisher token of it
with a topic that has a subscriber. busbar's `busbar web` is started here with its
defaults and the same subscriber shape. Each round runs wrk (-t2 -c8, as issue 16) on
Routemaster's publish, busbar's publish, then both floors (`GET /health`), the order of
the two servers turning round each round, so whatever else the cores are doing hits
both alike; the ratio is taken per round, then its median.

    .venv/bin/python -m bench.routemaster --url http://127.0.0.1:17555 --token TOKEN
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import statistics
import sys
import tempfile
from pathlib import Path

from bench import common, wrk
from bench.measure import machine
from bench.publish import EVENT, SUBSCRIPTION
from spec.integration.processes import children_of, wait_until

Figures = dict[str, list[wrk.Run]]  # "<server> <load>": a run per round


def runs(base: str, token: str, topic: str, seconds: float) -> dict[str, wrk.Run]:
    """Publish then floor on one server."""
    auth = "Basic " + base64.b64encode(f"{token}:".encode()).decode()
    headers = {"Authorization": auth, "Content-Type": "application/json"}
    body = json.dumps(EVENT).encode()
    return {
        "publish": wrk.run(f"{base}/topics/{topic}", "POST", body, headers, seconds, 8),
        "floor": wrk.run(f"{base}/health", "GET", None, {}, seconds, 8),
    }


def report(figures: Figures) -> str:
    lines = ["| server | load | rate req/s, median (min-max) | p99 ms (median) |", "|" + "---|" * 4]
    for name, series in figures.items():
        rates = [r.requests / r.seconds for r in series]
        server, load = name.split(" ")
        p99 = statistics.median(r.quantile(99) for r in series)
        lines.append(
            f"| {server} | {load} | {statistics.median(rates):,.0f} "
            f"({min(rates):,.0f}-{max(rates):,.0f}) | {p99:.2f} |"
        )
    ratios = [
        (b.requests / b.seconds) / (r.requests / r.seconds)
        for b, r in zip(figures["busbar publish"], figures["routemaster publish"], strict=True)
    ]
    lines.append(
        f"\nbusbar / Routemaster, single publish, per round: "
        f"{', '.join(f'{x:.2f}x' for x in ratios)}; median {statistics.median(ratios):.2f}x"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.routemaster", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--url", required=True, help="a running Routemaster, e.g. http://127.0.0.1:17555"
    )
    parser.add_argument("--token", required=True, help="a Routemaster publisher token")
    parser.add_argument("--topic", default="bench", help="its topic, with a subscriber")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    if not wrk.available():
        print(f"bench.routemaster: {wrk.MISSING}", file=sys.stderr)
        return 2
    figures: Figures = {}
    with tempfile.TemporaryDirectory(prefix="bench-rm-") as tmp, common.web_bus(Path(tmp)) as b:
        wait_until(lambda: len(children_of(b.pids["web"])) >= 2, what="gunicorn's workers")
        b.client("pub").close()
        with contextlib.closing(b.client("sub")) as sub:
            sub.ok("POST", "/subscription", SUBSCRIPTION)
        servers = {
            "busbar": (f"http://127.0.0.1:{b.port}", "pub", "bench"),
            "routemaster": (args.url.rstrip("/"), args.token, args.topic),
        }
        for server in servers.values():  # warm-up
            runs(*server, 1.0)
        for round_ in range(args.rounds):
            common.wait_quiet()
            order = list(servers) if round_ % 2 == 0 else list(reversed(servers))
            for name in order:
                for load, run in runs(*servers[name], args.seconds).items():
                    if run.bad_status or run.socket_errors:
                        raise RuntimeError(f"{name} {load}: {run.bad_status} bad statuses")
                    figures.setdefault(f"{name} {load}", []).append(run)
    command = " ".join([".venv/bin/python -m bench.routemaster", *(argv or sys.argv[1:])])
    print(f"Machine: {machine()}\n\nCommand: `{command}`\n")
    print(report(dict(sorted(figures.items()))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
