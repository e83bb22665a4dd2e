"""What a long answer does to the publishes beside it: a web process beside 10,000
subscribers, publishes to it one after another (round 6 kept connections), alone and
while root lists every subscription or every topic (as many) or Prometheus scrapes
`/metrics`, once a second;
this tree's web against a baseline's, on the same Redis and the same subscribers, in
the same run, taking turns.

    .venv/bin/python -m bench.stall                      # against BASELINE
    .venv/bin/python -m bench.stall --baseline <rev> --rounds 3

Measured: each publish's time (p50, p99, the longest) over 10 s, and the long answer's
own time. The web's defaults (the gevent worker) but one process (ONE_PROCESS).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench import common, engines
from bench.listing import subscribe
from bench.serial import checkout
from dev import redis_server
from spec.integration.processes import answers, running, wait_until

COMMAND = ".venv/bin/python -m bench.stall"
BASELINE = "62de330"  # before app/web/turns.py: a long answer held its web process
CASES = ("alone", "/subscriptions", "/metrics", "/topics")
CONNECTIONS = 6
RATE = 100  # publishes a second asked for (fewer when they wait)
# one web process: every publish then shares it with the long answer (of two, which
# process accepts a connection is the kernel's choice, and a run where the publishes'
# connections all went to the other one measured nothing)
ONE_PROCESS = {"BUSBAR_WEB_WORKERS": "1"}


def probe(port: int, seconds: float) -> list[float]:
    """Publishes one after another at RATE, round the connections: each one's ms."""
    apis = [common.Api(port, "pub") for _ in range(CONNECTIONS)]
    took: list[float] = []
    end = time.perf_counter() + seconds
    due = time.perf_counter()
    try:
        while time.perf_counter() < end:
            due += 1 / RATE
            started = time.perf_counter()
            status, _ = apis[len(took) % CONNECTIONS].call(
                "POST", "/topics/probe", {"type": "create", "url": "https://o.test/1"}
            )
            assert status == 204, status
            took.append(1000 * (time.perf_counter() - started))
            time.sleep(max(0.0, due - time.perf_counter()))
    finally:
        for api in apis:
            api.close()
    return took


def beside(port: int, root: str, path: str, seconds: float) -> dict[str, float]:
    """The publishes' figures over `seconds`, with `path` asked once a second meanwhile
    (none for "alone"), and that call's median time."""
    stop, calls = threading.Event(), []

    def long_answers() -> None:
        api = common.Api(port, root)
        with contextlib.closing(api):
            while not stop.is_set():
                started = time.perf_counter()
                status, _ = api.call("GET", path)
                assert status == 200, status
                calls.append(1000 * (time.perf_counter() - started))
                stop.wait(1.0)

    reader = threading.Thread(target=long_answers)
    if path != "alone":
        reader.start()
    try:
        took = sorted(probe(port, seconds))
    finally:
        stop.set()
        if reader.is_alive():
            reader.join()
    cuts = statistics.quantiles(took, n=100)
    return {"p50": cuts[49], "p99": cuts[98], "max": took[-1],
            "answer": statistics.median(calls) if calls else 0.0}  # fmt: skip


def many_topics(the_bus: common.Bus, count: int) -> None:
    """`count` topics more, 1,000 a subscription (the most one takes) of clients of
    their own: `GET /topics` reads every one."""
    for n in range(count // 1000):
        names = [f"t_{spelt(n)}_{spelt(i)}" for i in range(1000)]
        with contextlib.closing(the_bus.client(f"topics{n}")) as api:
            api.ok("POST", "/subscription", {"callback": "http://127.0.0.1:9/x", "topics": names})


def spelt(number: int) -> str:
    """A number in letters (a topic name is a-z and _): 105 -> "baf"."""
    return "".join("abcdefghij"[int(d)] for d in str(number))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=BASELINE, help="the commit to set against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--subscribers", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="1 round, 2,000 subscribers, 4 s")
    args = parser.parse_args(argv)
    rounds, size, seconds = (1, 2000, 4.0) if args.quick else (args.rounds, args.subscribers, 10.0)
    ours, base = engines.tree(), f"baseline {args.baseline}"
    rows: dict[tuple[str, str], list[dict[str, float]]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="busbar-bench-") as work,
        common.web_bus(Path(work), env=ONE_PROCESS) as the_bus,
    ):
        port = redis_server.free_port()
        env = {**the_bus.env, "PORT": str(port)}
        with running(["web"], env, cwd=checkout(args.baseline), log=Path(work) / "web-b.log"):
            wait_until(lambda: answers(f"http://127.0.0.1:{port}/health"), what="baseline web")
            webs = {ours: the_bus.port, base: port}
            the_bus.client("pub").close()
            subscribe(the_bus, 0, size)
            many_topics(the_bus, size)
            for r in range(rounds):
                for label, web in list(webs.items())[:: 1 if r % 2 == 0 else -1]:
                    for case in CASES:
                        found = beside(web, the_bus.root, case, seconds)
                        rows.setdefault((label, case), []).append(found)
                        print(f"round {r}, {label}, {case}: {found}", flush=True)
    command = COMMAND + (" --quick" if args.quick else "")
    common.write_report("stall", report(command, rows, ours, base, size, seconds))
    common.write_headlines("stall", [
        (f"publish p99 beside GET {path} a second, {size:,} subscribers, ms",
         common.spread([r["p99"] for r in rows[(ours, path)]], "{:.1f}") + f" ({base}: "
         + common.spread([r["p99"] for r in rows[(base, path)]], "{:.1f}") + ")")
        for path in CASES[1:]
    ])  # fmt: skip


def report(
    command: str, rows: dict[tuple[str, str], list[dict[str, float]]], ours: str, base: str,
    size: int, seconds: float,
) -> str:  # fmt: skip
    lines = [
        "# What a long answer does to the publishes beside it",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        f"One Redis, {size:,} subscribers and as many topics, this tree's `busbar web` "
        "and the baseline's (a worktree of its commit) on the same store, each with the "
        "defaults (gevent) but one process, so that every publish shares it with the long "
        "answer; no worker. "
        f"A case: publishes one after another for {seconds:.0f} s "
        f"(asked at {RATE} a second, round {CONNECTIONS} kept connections), alone or while "
        "root asks the path once a second; the two webs take turns. Median (min-max) "
        "over the rounds.",
        "",
        "| web | beside | publish p50, ms | p99, ms | longest, ms | the long answer, ms |",
        "|---|---|---|---|---|---|",
    ]
    for (label, case), runs in rows.items():
        cells = [common.spread([r[k] for r in runs], "{:.1f}") for k in ("p50", "p99", "max")]
        answer = common.spread([r["answer"] for r in runs], "{:.0f}") if case != "alone" else ""
        lines.append(f"| {label} | {case} | {' | '.join(cells)} | {answer} |")
    lines.append("")
    for case in CASES[1:]:
        pairs = zip(rows[(ours, case)], rows[(base, case)], strict=True)
        longest = common.spread([o["max"] / max(b["max"], 0.1) for o, b in pairs], "{:.2f}")
        lines.append(f"Beside {case}: this tree's longest publish {longest}x the baseline's.")
    return "\n".join([*lines, ""])


if __name__ == "__main__":
    main()
