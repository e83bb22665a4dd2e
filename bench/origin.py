"""Connections per origin (issue 37 item 5): one event published to a topic that 1,000
subscribers follow, every one of whose callbacks is on ONE origin: a standard library
`http.server.ThreadingHTTPServer` in its own process on 127.0.0.1, its accept backlog
left at socketserver's `request_queue_size = 5`, answering each POST 200 after 50 ms.
A worker that opens a connection per delivery at once overflows that backlog: the
kernel drops the SYNs, connects time out, attempts fail and are retried. This measures
how long the last subscribers wait, and what the origin and the kernel saw.

Each subscriber has its own path (`/s/<n>`), so the origin records whom each request
was for and when it arrived; subscriptions use `max: 1` and `timeout: 0`, so every
batch is due at once. The origin speaks HTTP/1.1 keep-alive, as a real server does.

Measured per round: each subscriber's first arrival, ms after the publish's answer (p50,
p99, max), over a round capped at 60 s; failed delivery attempts and attempts held back
(GET /metrics, `busbar_delivery_failures_total` and `busbar_delivery_held_back_total`,
before and after); TCP connections the origin accepted and the most it had open at once;
the kernel's ListenOverflows and ListenDrops (/proc/net/netstat, machine-wide: anything
else listening on this machine counts too).

Rounds are independent: every round (config) gets a fresh `busbar worker` started with
its environment and stopped (gracefully) after the round, so only one worker ever takes
jobs (the job queue is shared: a second worker would deliver another config's events)
and no round inherits kept-alive connections from the one before; each round is a cold
burst, as after any pause longer than the worker's 15 s keep-alive. Redis, `busbar web`,
the subscribers and the origin are shared. The first round of each config is a warm-up
(first use of Redis, web, the origin's threads), shown but not counted. With --configs,
the configs take turns round by round, so a drift of the machine falls on all alike.

    .venv/bin/python -m bench.origin [--quick] [--rounds N] [--subscribers N]
        [--answer-ms N] [--env NAME=VALUE ...] [--configs "label=NAME=VALUE,...;..."]

--configs defaults to "default=", the product's defaults; beside them, in the same run
and taking turns, runs the baseline: a worker from a worktree of --baseline (4ef17ea,
the engine before connections per origin were bounded; 'none' for no baseline). --env
applies to web and every worker. The report goes to bench/results/origin.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import resource
import shlex
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NamedTuple

from bench import common, engines

COMMAND = ".venv/bin/python -m bench.origin"
DEFAULT_CONFIGS = "default="
BASELINE = "4ef17ea"  # the engine before connections per origin were bounded (issue 37)
TOPIC = "origin_fan"
CAP_S = 60.0  # a round's measurement ends here, whether or not all have the event
DRAIN_S = 120.0  # after a capped round, unmeasured: let the rest arrive before the next
ACK_S = 15.0  # after the last arrival: until the worker has acknowledged every one
COUNTERS = ("delivery.failures", "delivery.held_back", "delivery.events")
NETSTAT = ("ListenOverflows", "ListenDrops")
Arrival = tuple[float, int, list[Any]]  # (received at ms, subscriber, data["r"] of events)


class Config(NamedTuple):
    label: str
    env: dict[str, str]  # the worker's settings on top of the bus's
    code: Path | None = None  # a checkout to run the worker from (a baseline), or this tree


# --- the origin: its own process ---------------------------------------------------


class Tally:
    """What the origin saw, under one lock: requests, connections accepted and open."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.arrivals: list[Arrival] = []
        self.seen: dict[Any, set[int]] = {}  # round tag: subscribers that had it
        self.accepted = self.open = self.peak_open = self.in_flight = 0

    def arrived(self, at: float, subscriber: int, tags: list[Any]) -> None:
        with self.lock:
            self.arrivals.append((at, subscriber, tags))
            for tag in tags:
                self.seen.setdefault(tag, set()).add(subscriber)
            self.in_flight += 1

    def answered(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def connected(self) -> None:
        with self.lock:
            self.accepted += 1
            self.open += 1
            self.peak_open = max(self.peak_open, self.open)

    def closed(self) -> None:
        with self.lock:
            self.open -= 1

    def reset(self) -> None:
        """A new round: counts and peak from now, records dropped."""
        with self.lock:
            self.arrivals, self.seen = [], {}
            self.accepted, self.peak_open = 0, self.open

    def stats(self) -> dict[str, int]:
        with self.lock:
            return {"accepted": self.accepted, "open": self.open,
                    "peak_open": self.peak_open, "in_flight": self.in_flight}  # fmt: skip

    def have(self, tag: Any) -> int:
        with self.lock:
            return len(self.seen.get(tag, ()))

    def take(self) -> list[Arrival]:
        with self.lock:
            taken, self.arrivals = self.arrivals, []
        return taken


def handler_for(tally: Tally, answer_s: float) -> type[BaseHTTPRequestHandler]:
    """200 to every POST after `answer_s`, on keep-alive connections."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            at = time.time() * 1000
            events = json.loads(body) if body else []
            tags = [(e.get("data") or {}).get("r") for e in events]
            tally.arrived(at, int(self.path.rsplit("/", 1)[-1]), tags)
            try:
                time.sleep(answer_s)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            finally:
                tally.answered()

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def server_for(tally: Tally, answer_s: float) -> ThreadingHTTPServer:
    """The stdlib's threading server, accept backlog left at its default (5)."""

    class Server(ThreadingHTTPServer):
        def process_request(self, request: Any, client_address: Any) -> None:
            tally.connected()  # on the accepting thread, as accept() returned it
            super().process_request(request, client_address)

        def process_request_thread(self, request: Any, client_address: Any) -> None:
            try:
                super().process_request_thread(request, client_address)
            finally:
                tally.closed()

    return Server(("127.0.0.1", 0), handler_for(tally, answer_s))


def _serve(control: Connection, answer_s: float) -> None:
    """The origin process: the server on its threads, the parent's requests on this one."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a socket per connection
    tally = Tally()
    server = server_for(tally, answer_s)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    control.send(server.server_address[1])
    calls: dict[str, Callable[..., Any]] = {
        "reset": tally.reset, "stats": tally.stats, "have": tally.have, "take": tally.take,
    }  # fmt: skip
    while (asked := control.recv())[0] != "stop":
        control.send(calls[asked[0]](*asked[1:]))


class Origin:
    """The parent's handle on the origin process."""

    def __init__(self, answer_s: float) -> None:
        ctx = mp.get_context("spawn")
        self._control, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, answer_s), daemon=True)
        self.process.start()
        self.port: int = self._control.recv()

    def call(self, *asked: Any) -> Any:
        self._control.send(asked)
        return self._control.recv()

    def stop(self) -> None:
        self._control.send(("stop",))
        self.process.join(5)
        self.process.kill()  # a no-op once it has exited


# --- the bench side ----------------------------------------------------------------


def pairs(text: str) -> dict[str, str]:
    """`A=1,B=2` -> {"A": "1", "B": "2"}; empty -> {}."""
    found: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise argparse.ArgumentTypeError(f"not NAME=VALUE: {item!r}")
        found[name.strip()] = value.strip()
    return found


def configs(text: str) -> list[Config]:
    """`default=;big=A=1,B=2` -> labelled environments, in order."""
    found: list[Config] = []
    for item in filter(None, (x.strip() for x in text.split(";"))):
        label, eq, rest = item.partition("=")
        if not eq or not label.strip():
            raise argparse.ArgumentTypeError(f"not label=NAME=VALUE,...: {item!r}")
        found.append(Config(label.strip(), pairs(rest)))
    if len({c.label for c in found}) != len(found) or not found:
        raise argparse.ArgumentTypeError("configs need distinct labels, at least one")
    return found


def counters(the_bus: common.Bus) -> dict[str, float | None]:
    """The bus's counters in COUNTERS from GET /metrics (None: not exposed by this tree)."""
    with contextlib.closing(the_bus.api()) as root:
        page = root.ok("GET", "/metrics").decode()
    values: dict[str, float] = {}
    for line in page.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return {c: values.get("busbar_" + c.replace(".", "_") + "_total") for c in COUNTERS}


def netstat() -> dict[str, int]:
    """The kernel's TcpExt counters in NETSTAT (machine-wide, since boot)."""
    lines = [x.split() for x in Path("/proc/net/netstat").read_text().splitlines()]
    for names, values in zip(lines[::2], lines[1::2], strict=True):
        if names[0] == "TcpExt:":
            table = dict(zip(names[1:], values[1:], strict=True))
            return {k: int(table.get(k, 0)) for k in NETSTAT}
    return dict.fromkeys(NETSTAT, 0)


def wait(predicate: Callable[[], bool], limit: float, step: float = 0.02) -> bool:
    """Until predicate() or `limit` s; whether it came true."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def delta(after: dict[str, float | None], before: dict[str, float | None], key: str) -> float:
    """A counter's growth; NaN when the tree does not expose it."""
    a, b = after[key], before[key]
    return float("nan") if a is None or b is None else a - b


@contextmanager
def worker_with(the_bus: common.Bus, env: dict[str, str], code: Path | None) -> Iterator[None]:
    """A `busbar worker` (from `code`, a baseline's checkout, or this tree) started with
    the bus's environment and `env` on top; stopped with SIGTERM (its graceful stop) on
    the way out."""
    base = the_bus.env
    the_bus.env = {**base, **env}
    try:
        with common.worker(the_bus, code):
            the_bus.env = base
            yield
    finally:
        the_bus.env = base


def arrivals(taken: list[Arrival], tag: int, sent: float) -> tuple[list[float], int]:
    """Each subscriber's first arrival of round `tag`, ms after `sent` (sorted), and how
    many requests carried the event in all (more than subscribers: some came twice)."""
    first: dict[int, float] = {}
    requests = 0
    for at, subscriber, tags in taken:
        if tag in tags:
            requests += 1
            first[subscriber] = min(at, first.get(subscriber, at))
    return sorted(at - sent for at in first.values()), requests


def publish(the_bus: common.Bus, tag: int) -> float:
    """One event to TOPIC, tagged with the round; the time (ms) its publish answered."""
    with contextlib.closing(the_bus.api("pub")) as pub:
        pub.ok("POST", f"/topics/{TOPIC}",
               {"type": "create", "url": "https://o.test/1", "data": {"r": tag}})  # fmt: skip
        return time.time() * 1000


def one_round(the_bus: common.Bus, origin: Origin, tag: int, count: int) -> dict[str, Any]:
    """Publish once; measure until every subscriber had it (or CAP_S) and the worker
    acknowledged what arrived; then, unmeasured, let a capped round's rest arrive."""
    wait(lambda: origin.call("stats")["open"] == 0, 10, 0.1)  # the last worker's are gone
    before, kernel = counters(the_bus), netstat()
    origin.call("reset")
    sent = publish(the_bus, tag)
    began = time.monotonic()
    complete = wait(lambda: origin.call("have", tag) >= count, CAP_S)
    seconds = time.monotonic() - began
    reached = origin.call("have", tag)
    wait(lambda: origin.call("stats")["in_flight"] == 0, 5)
    wait(lambda: delta(counters(the_bus), before, "delivery.events") >= reached, ACK_S, 0.2)
    after, kernel_after, stats = counters(the_bus), netstat(), origin.call("stats")
    times, requests = arrivals(origin.call("take"), tag, sent)
    if not complete:
        wait(lambda: origin.call("have", tag) >= count, DRAIN_S, 0.2)
    return {
        "complete": complete,
        "reached": reached,
        "p50": common.pct(times, 50) if times else float("nan"),
        "p99": common.pct(times, 99) if times else float("nan"),
        "max": times[-1] if times else float("nan"),
        "failed": delta(after, before, "delivery.failures"),
        "held_back": delta(after, before, "delivery.held_back"),
        "accepted": stats["accepted"],
        "peak_open": stats["peak_open"],
        "requests": requests,
        **{k: kernel_after[k] - kernel[k] for k in NETSTAT},
        "seconds": seconds,
    }


def subscribe(the_bus: common.Bus, origin: Origin, count: int) -> None:
    """The publisher `pub`, and `count` subscribers of TOPIC, each at its own path."""
    the_bus.client("pub").close()
    url = f"http://127.0.0.1:{origin.port}/s"
    engines.subscribe_many(the_bus, [
        (f"o{i}", {"topics": [TOPIC], "max": 1, "timeout": 0, "callback": f"{url}/{i}"})
        for i in range(count)
    ])  # fmt: skip


def brief(one: dict[str, Any]) -> str:
    return (
        f"p50 {one['p50']:,.0f} ms, p99 {one['p99']:,.0f} ms, max {one['max']:,.0f} ms, "
        f"reached {one['reached']:,}, failed {one['failed']:,.0f}, "
        f"held back {one['held_back']:,.0f}, requests {one['requests']:,}, "
        f"accepted {one['accepted']:,}, most open {one['peak_open']:,}, "
        f"ListenOverflows {one['ListenOverflows']:,}, ListenDrops {one['ListenDrops']:,}"
    )


def run(args: argparse.Namespace, plan: list[Config]) -> dict[str, dict[str, Any]]:
    """Every config, taking turns round by round: {label: {"first", "rounds"}}."""
    results: dict[str, dict[str, Any]] = {c.label: {"rounds": []} for c in plan}
    origin = Origin(args.answer_ms / 1000)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="busbar-bench-") as work,
            common.web_bus(Path(work), env=args.env) as the_bus,
        ):
            began = time.monotonic()
            subscribe(the_bus, origin, args.subscribers)
            print(f"set up {args.subscribers:,} subscribers in "
                  f"{time.monotonic() - began:.0f} s", flush=True)  # fmt: skip
            for r in range(args.rounds + 1):
                for i, config in enumerate(plan):
                    common.wait_quiet()
                    with worker_with(the_bus, config.env, config.code):
                        time.sleep(1)  # settled in
                        one = one_round(the_bus, origin, r * len(plan) + i, args.subscribers)
                    slot = results[config.label]
                    if r:
                        slot["rounds"].append(one)
                    else:
                        slot["first"] = one
                    print(f"{config.label} round {r}: {brief(one)}", flush=True)
    finally:
        origin.stop()
    return results


def table(results: dict[str, dict[str, Any]], plan: list[Config], count: int) -> list[str]:
    lines = [
        "| config | worker env | reached | p50 | p99 | max | warm-up p99 | failed attempts "
        "| held back | connections accepted | most open at once | ListenOverflows "
        "| ListenDrops |",
        "|---" * 13 + "|",
    ]
    for config in plan:
        runs, first = results[config.label]["rounds"], results[config.label]["first"]

        def col(field: str, runs: list[dict[str, Any]] = runs) -> str:
            return common.spread([r[field] for r in runs])

        env = ", ".join(f"{k}={v}" for k, v in config.env.items()) or "(defaults)"
        lines.append(
            f"| {config.label} | {env} | {col('reached')} of {count:,} | {col('p50')} ms "
            f"| {col('p99')} ms | {col('max')} ms | {first['p99']:,.0f} ms | {col('failed')} "
            f"| {col('held_back')} | {col('accepted')} | {col('peak_open')} "
            f"| {col('ListenOverflows')} | {col('ListenDrops')} |"
        )
    return lines


def headline(label: str, runs: list[dict[str, Any]], count: int) -> str:
    """One line: p99 arrival and failed attempts, median (min-max) over the rounds."""
    p99 = common.spread([r["p99"] for r in runs])
    failed = common.spread([r["failed"] for r in runs])
    short = [r for r in runs if not r["complete"]]
    tail = f"; {len(short)} round(s) short of {count:,} at {CAP_S:.0f} s" if short else ""
    return f"{label}: p99 arrival {p99} ms, {failed} failed attempts{tail}"


def report(args: argparse.Namespace, plan: list[Config], results: dict[str, Any]) -> None:
    head = (f"# One origin, {args.subscribers:,} subscribers: one event, every callback "
            f"on one ThreadingHTTPServer (backlog 5) answering in {args.answer_ms} ms")  # fmt: skip
    lines = [
        head,
        "",
        f"`{shlex.join([*COMMAND.split(), *args.given])}` "
        f"({args.rounds} round(s) after a warm-up); {common.machine()}; "
        f"worker from {engines.tree()}.",
        "",
        "Median (min-max) over the rounds; arrival ms after the publish's answer, first "
        "arrival per subscriber, p50/p99/max over those reached within "
        f"{CAP_S:.0f} s. ListenOverflows/ListenDrops are the kernel's, machine-wide.",
        "",
        *table(results, plan, args.subscribers),
        "",
        *(headline(c.label, results[c.label]["rounds"], args.subscribers) for c in plan),
    ]
    common.write_report("origin", "\n".join(lines) + "\n")
    common.write_headlines("origin", [
        (f"{c.label}: p99 arrival ms, 1 event to {args.subscribers:,} subscribers on one "
         f"origin ({args.answer_ms} ms answers)",
         common.spread([r["p99"] for r in results[c.label]["rounds"]]))
        for c in plan
    ] + [
        (f"{c.label}: failed attempts a round",
         common.spread([r["failed"] for r in results[c.label]["rounds"]]))
        for c in plan
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.origin", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 round, 200 subscribers")
    parser.add_argument("--rounds", type=int, help="rounds after the warm-up (default 5)")
    parser.add_argument("--subscribers", type=int, help="default 1,000")
    parser.add_argument("--answer-ms", type=int, default=50, help="the origin's answer time")
    parser.add_argument("--env", type=pairs, action="append", default=[],
                        help="NAME=VALUE for web and every worker (repeatable)")  # fmt: skip
    parser.add_argument("--baseline", default=BASELINE,
                        help=f"commit whose worker runs beside, in the same run (default "
                             f"{BASELINE}; 'none': no baseline)")  # fmt: skip
    parser.add_argument("--configs", type=configs, default=configs(DEFAULT_CONFIGS),
                        help='"label=NAME=VALUE,...;label=..." (empty: defaults)')  # fmt: skip
    args = parser.parse_args(argv)
    args.given = sys.argv[1:] if argv is None else argv
    args.env = {k: v for one in args.env for k, v in one.items()}
    args.rounds = args.rounds if args.rounds is not None else (1 if args.quick else 5)
    args.subscribers = args.subscribers or (200 if args.quick else 1000)
    if args.baseline != "none":  # its worker from a worktree of that commit (bench.serial's)
        from bench.serial import checkout

        args.configs = [
            *args.configs,
            Config(f"baseline {args.baseline}", {}, checkout(args.baseline)),
        ]
    results = run(args, args.configs)
    report(args, args.configs, results)


if __name__ == "__main__":
    main()
