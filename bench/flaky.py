"""A subscriber that fails now and then (issue 37 item 4): it answers 500 to 30% of
requests at random (200 to the rest, each after 5 ms), fed a steady 15 events/s for
--minutes (default 5) on `max: 5`, `timeout: 100`. Does it keep up?

Cases, one after another, each with its own `busbar worker` and a fresh subscriber:
- `retry 1 s (before)`: the failure policy as it was, every failure waiting at least
  BUSBAR_RETRY_FIRST_MS (1 s) and the circuit opening at 5 failures in a row:
  BUSBAR_RETRY_LONE_MS=0, BUSBAR_CIRCUIT_FAILURES=5;
- `lone 100 ms`: a lone failure retried after BUSBAR_RETRY_LONE_MS, the second in a
  row after 1 s, doubling, and the circuit opening at 10 failures in a row
  (BUSBAR_RETRY_ALIVE_MS=0: the policy of bb029bd);
- `defaults`: the same, but while the endpoint answered 2xx within BUSBAR_RETRY_ALIVE_MS
  (10 s), failures in a row back off from 100 ms, doubling;
- `defaults, concurrency 8`: the same with ordering keys (urls over 50 keys).

Measured: the backlog (events queued, GET /subscriptions) sampled every 5 s while
publishing: its largest and its last; then how long after publishing stopped until
everything was delivered (capped at 120 s); events missing at the end (must be 0 when
it drained).

--baseline REV: each case runs twice, with a worker from a checkout of REV (a git
worktree under var/, bench.serial.checkout) and with this tree's, the order turning
round case by case, on the same web, Redis and subscriber process; both side by side
in bench/results/flaky-baseline.md (the report without it stays bench/results/flaky.md).
A case's settings go to both workers: a baseline that lacks one ignores it.

    .venv/bin/python -m bench.flaky [--quick] [--minutes N] [--baseline REV]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path
from typing import NamedTuple

from bench import common, engines

COMMAND = ".venv/bin/python -m bench.flaky"
TOPIC = "flaky_bench"
RATE = 15.0
FAIL = 0.3
DRAIN_CAP_S = 120.0


class Case(NamedTuple):
    label: str
    env: dict[str, str]
    concurrency: int = 1


CASES = (
    Case("retry 1 s (before)", {"BUSBAR_RETRY_LONE_MS": "0", "BUSBAR_CIRCUIT_FAILURES": "5"}),
    Case("lone 100 ms", {"BUSBAR_RETRY_ALIVE_MS": "0"}),
    Case("defaults", {}),
    Case("defaults, concurrency 8", {}, 8),
)


def serve(port_out: Connection, count_pipe: Connection) -> None:
    """The flaky subscriber in its own process; answers the event numbers it acknowledged."""
    rng, lock = random.Random(37), threading.Lock()
    acked: set[tuple[int, int]] = set()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            time.sleep(0.005)
            with lock:
                ok = rng.random() >= FAIL
                if ok:
                    acked.update((e["data"]["run"], e["data"]["i"]) for e in json.loads(body))
            self.send_response(200 if ok else 500)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port_out.send(server.server_address[1])
    while (run := count_pipe.recv()) is not None:
        with lock:
            count_pipe.send(len([i for r, i in acked if r == run]))


def one_case(
    bus: common.Bus,
    pipe: Connection,
    port: int,
    case: Case,
    n: int,
    minutes: float,
    code: Path | None = None,
) -> dict:
    """One case on a fresh subscriber `f{n}` and a worker run from `code` (None: this
    tree), stopped gracefully once it drained, so the next case's worker starts on a clean
    bus."""
    bus.env = {**bus.env, **case.env}
    with common.worker(bus, code), contextlib.closing(bus.client(f"f{n}")) as api:
        sub = {"topics": [TOPIC], "callback": f"http://127.0.0.1:{port}/", "max": 5,
               "timeout": 100, "concurrency": case.concurrency}  # fmt: skip
        api.ok("POST", "/subscription", sub)
        samples: list[int] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(5):
                entry = json.loads(api.ok("GET", "/subscriptions"))[0]
                samples.append(int(entry["events"]["queued"]))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        count = int(RATE * minutes * 60)

        def send(pub: common.Api, i: int) -> None:
            event = {
                "type": "update",
                "url": f"https://o.test/{i % 50}",
                "data": {"run": n, "i": i},
            }
            pub.ok("POST", f"/topics/{TOPIC}", event)

        common.paced(RATE, lambda: bus.api("pub"), send, count)
        stop.set()
        sampler.join()
        ended = time.monotonic()
        got = 0
        while time.monotonic() - ended < DRAIN_CAP_S:
            pipe.send(n)
            got = pipe.recv()
            if got >= count:
                break
            time.sleep(0.5)
        drain = time.monotonic() - ended
        api.call("DELETE", "/subscriber")
    return {
        "largest backlog": max(samples or [0]),
        "backlog at the end": samples[-1] if samples else 0,
        "drained in s": drain if got >= count else float("inf"),
        "missing": count - got,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.flaky", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--quick", action="store_true", help="1 minute a case")
    parser.add_argument(
        "--baseline", metavar="REV", help="also run each case with a worker from a checkout "
        "of REV, alternating with this tree's (default: this tree alone)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    minutes = 1.0 if args.quick else args.minutes
    command = " ".join([
        COMMAND, *(["--quick"] if args.quick else []),
        *([f"--minutes {args.minutes:g}"] if not args.quick and args.minutes != 5 else []),
        *([f"--baseline {args.baseline}"] if args.baseline else []),
    ])  # fmt: skip
    variants = engines.variants(args.baseline) if args.baseline else {engines.tree(): None}
    origin, port, pipe = common.server_process(serve)
    results: dict[str, dict[str, dict]] = {label: {} for label in variants}
    firsts: list[str] = []
    moved: list[str] = []  # this tree's cases that ran on a working tree not as at the start
    with tempfile.TemporaryDirectory() as work, common.web_bus(Path(work)) as bus:
        base = dict(bus.env)
        bus.client("pub").close()  # the topic's one publisher
        n = 0
        for c, case in enumerate(CASES):  # the order turns round, so drift hits both
            order = list(variants.items())[:: 1 if c % 2 == 0 else -1]
            firsts.append(order[0][0])
            for label, code in order:
                n += 1
                bus.env = dict(base)
                if code is None and (now := engines.tree()) != label:
                    moved.append(f"{case.label}: {now}")
                got = one_case(bus, pipe, port, case, n, minutes, code)
                results[label][case.label] = got
                print(f"{label}, {case.label}: {json.dumps(got)}", flush=True)
    pipe.send(None)
    origin.terminate()
    if args.baseline:
        baseline, ours = variants
        compare(results, baseline, ours, firsts, minutes, command, moved)
    else:
        report(next(iter(results.values())), minutes, command, moved)


def described(minutes: float, command: str) -> str:
    return (
        f"`{command}`, {common.machine()}. A subscriber "
        f"answering 500 to {FAIL:.0%} of requests at random, fed {RATE:g} events/s for "
        f"{minutes:g} min on `max: 5`; one worker, defaults but for the case's."
    )


def changed(moved: list[str]) -> list[str]:
    """A line saying which cases ran this tree's worker on a working tree that had
    changed since the start (a commit or an edit meanwhile), if any did."""
    if not moved:
        return []
    return ["This tree's worker runs from the working tree, which changed during the run; "
            "these cases ran on: " + "; ".join(moved) + ".", ""]  # fmt: skip


def drained(r: dict) -> str:
    return "inf" if r["drained in s"] == float("inf") else f"{r['drained in s']:.1f}"


def seen(r: dict) -> str:
    return f"{r['largest backlog']:,}, " + ("never" if drained(r) == "inf" else f"{drained(r)} s")


def compare(
    results: dict[str, dict[str, dict]],
    baseline: str,
    ours: str,
    firsts: list[str],
    minutes: float,
    command: str,
    moved: list[str],
) -> None:
    """The report of a run with --baseline: each case's figures for both workers."""
    fields = ("largest backlog", "backlog at the end", "drained in (s)", "missing")
    b, o = results[baseline], results[ours]

    def cells(r: dict) -> list[str]:
        return [f"{r['largest backlog']:,}", f"{r['backlog at the end']:,}", drained(r),
                f"{r['missing']:,}"]  # fmt: skip

    lines = [
        "# A subscriber that fails now and then: this tree against a baseline",
        "",
        described(minutes, command),
        "",
        f"Each case ran twice in the same run, on the same web, Redis and subscriber "
        f"process: with a worker of `{baseline}` (a checkout of that commit) and with one "
        f"of `{ours}`, the order turning round case by case; each figure has the "
        "baseline's column, then this tree's.",
        "",
        "| case | ran first | " + " | ".join(f"{f}: baseline | this tree" for f in fields) + " |",
        "|---|---|" + "---|---|" * len(fields),
        *(f"| {case.label} | {'baseline' if first == baseline else 'this tree'} | "
          + " | ".join(f"{x} | {y}" for x, y in zip(cells(b[case.label]), cells(o[case.label]),
                                                      strict=True)) + " |"
          for case, first in zip(CASES, firsts, strict=True)),
        "",
        *changed(moved),
        f"Drained is measured from the last publish, capped at {DRAIN_CAP_S:.0f} s (inf: not "
        "drained by then).",
        "",
    ]  # fmt: skip
    common.write_report("flaky-baseline", "\n".join(lines))
    common.write_headlines(
        "flaky-baseline",
        [(f"Flaky subscriber ({FAIL:.0%} 500s, {RATE:g} events/s), {case.label}: largest "
          f"backlog and drain, {ours} vs {baseline}",
          f"{seen(o[case.label])} vs {seen(b[case.label])}") for case in CASES],
    )  # fmt: skip


def report(results: dict[str, dict], minutes: float, command: str, moved: list[str]) -> None:
    lines = [
        "# A subscriber that fails now and then (issue 37 item 4)",
        "",
        described(minutes, command),
        "",
        "| case | largest backlog | backlog at the end | drained in (s) | missing |",
        "|---|---|---|---|---|",
        *(f"| {label} | {r['largest backlog']:,} | {r['backlog at the end']:,} | "
          f"{drained(r)} | {r['missing']:,} |" for label, r in results.items()),
        "",
        *changed(moved),
        f"Drained is measured from the last publish, capped at {DRAIN_CAP_S:.0f} s (inf: not "
        "drained by then).",
        "",
    ]  # fmt: skip
    common.write_report("flaky", "\n".join(lines))
    before, now = results[CASES[0].label], results[CASES[2].label]
    common.write_headlines(
        "flaky",
        [(f"Flaky subscriber (30% 500s, {RATE:g} events/s): largest backlog and drain, "
          "defaults vs 1 s retry", f"{seen(now)} vs {seen(before)}")],
    )  # fmt: skip


if __name__ == "__main__":
    main()
