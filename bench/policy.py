"""The failure policy from outside (docs/delivery.md), against the health curve of the
baseline worker (Routemaster's `MAX_BACKOFF x 2^(-hp/10)`) in the same run:

- dead: a subscriber whose endpoint answers 500 at once, for `--minutes`: how many
  attempts it gets (in the first minute, and in all).
- retry-after: a subscriber answering `503` with `Retry-After: 2` for 10 s, then 204,
  with `max_attempts: 3` and 5 events (`max: 1`): attempts meanwhile, health lost,
  events dead-lettered, and how soon after its recovery the last event arrives, in order.

Each worker has a bus of its own (Redis, `busbar web`, `busbar worker` with product
defaults); the baseline's and this tree's run at once (their load is a few requests).

    .venv/bin/python -m bench.policy [--minutes 10] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import common, engines
from spec.integration.subscriber import Received, Subscriber, serving

COMMAND = ".venv/bin/python -m bench.policy"
DOWN_S, EVENTS = 10.0, 5


def on_bus(code: Path | None, sub: Subscriber, body: dict, n: int, watch: Any) -> dict:
    """A bus with one subscriber `sub` (subscription `body`), `n` events published once
    the worker runs; `watch(api)` measures and returns what it found."""
    with (
        tempfile.TemporaryDirectory(prefix="busbar-bench-") as work,
        common.web_bus(Path(work)) as the_bus,
        serving(sub),
    ):
        the_bus.client("pub").close()
        api = the_bus.client("sub")
        api.ok("POST", "/subscription", {"callback": sub.url, **body})
        with engines.worker(the_bus, code):
            events = [{"type": "create", "url": f"https://o.test/{i}", "data": {"i": i}}
                      for i in range(n)]  # fmt: skip
            with contextlib.closing(the_bus.api("pub")) as pub:
                pub.ok("POST", "/topics/orders", events)
            return watch(api)  # type: ignore[no-any-return]


def listing(api: common.Api) -> dict:
    return json.loads(api.ok("GET", "/subscriptions"))[0]  # type: ignore[no-any-return]


def dead(code: Path | None, minutes: float) -> dict[str, Any]:
    sub = Subscriber(responder=lambda _: (500, 0.0))

    def watch(api: common.Api) -> dict:
        time.sleep(minutes * 60)
        first = sub.received[0].at if sub.received else time.time()
        return {
            "attempts": len(sub.received),
            "first_minute": sum(1 for r in sub.received if r.at < first + 60),
            "last_minute": sum(1 for r in sub.received if r.at >= first + (minutes - 1) * 60),
            "health": listing(api)["health_points"],
        }

    return on_bus(code, sub, {"topics": ["orders"], "timeout": 0}, 1, watch)


def retry_after(code: Path | None) -> dict[str, Any]:
    recovers: list[float] = []

    def responder(_request: Received) -> tuple[int, float]:
        return (503 if not recovers or time.time() < recovers[0] else 204), 0.0

    sub = Subscriber(responder=responder)
    sub.headers_out["Retry-After"] = "2"  # heeded on a 503 only

    def watch(api: common.Api) -> dict:
        recovers.append(time.time() + DOWN_S)
        deadline = recovers[0] + 60
        while len(sub.delivered) < EVENTS and time.time() < deadline:
            entry = listing(api)
            if entry["events"]["queued"] == 0 and time.time() > recovers[0]:
                break
            time.sleep(0.1)
        entry = listing(api)
        order = [e["data"]["i"] for e in sub.delivered]
        arrived = [r.at for r in sub.received if r.status == 204]
        return {
            "asked": sum(1 for r in sub.received if r.status == 503),
            "health": entry["health_points"],
            "dead": entry.get("deadletters", "?"),
            "delivered": len(set(order)),
            "in_order": order == sorted(order),
            "after_recovery_s": max(arrived) - recovers[0] if arrived else None,
        }

    body = {"topics": ["orders"], "timeout": 0, "max": 1, "max_attempts": 3}
    return on_bus(code, sub, body, EVENTS, watch)


def report(rows: dict[str, dict], minutes: float, command: str) -> str:
    lines = [
        "# Failure policy: a dead endpoint and a 503 with Retry-After",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        "One bus per worker (Redis, `busbar web`, `busbar worker`, product defaults), the "
        "baseline's (the health curve: delay `BUSBAR_MAX_BACKOFF_MS x 2^(-hp/10)`) and this "
        "tree's (docs/delivery.md: a delay from the first failure, then a circuit) at once.",
        "",
        f"Dead: an endpoint answering 500 at once, one event, for {minutes:g} minutes.",
        "",
        "| worker | attempts, first minute | last minute | all | health points after |",
        "|---|---|---|---|---|",
    ]
    for label, r in rows.items():
        d = r["dead"]
        lines.append(
            f"| {label} | {d['first_minute']} | {d['last_minute']} | {d['attempts']} "
            f"| {d['health']} |"
        )
    lines += [
        "",
        f"Retry-After: `503` with `Retry-After: 2` for {DOWN_S:g} s, then `204`; "
        f"`max: 1, max_attempts: 3`, {EVENTS} events.",
        "",
        "| worker | 503s answered | health points after | dead-lettered | delivered "
        "| in order | last arrival after recovery |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, r in rows.items():
        a = r["retry_after"]
        after = "never" if a["after_recovery_s"] is None else f"{a['after_recovery_s']:.1f} s"
        lines.append(
            f"| {label} | {a['asked']} | {a['health']} | {a['dead']} | {a['delivered']} of "
            f"{EVENTS} | {'yes' if a['in_order'] else 'no'} | {after} |"
        )
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.policy", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="the dead endpoint's run")
    parser.add_argument("--quick", action="store_true", help="a 2-minute dead run")
    parser.add_argument("--baseline", default=engines.BASELINE, help="commit to compare with")
    args = parser.parse_args(argv)
    if args.quick:
        args.minutes = 2.0
    command = " ".join([COMMAND, *(["--quick"] if args.quick else [])])
    variants = engines.variants(args.baseline)
    rows: dict[str, dict] = {label: {} for label in variants}
    lock = threading.Lock()

    def run(label: str, code: Path | None, name: str, job: Any) -> None:
        result = job(code)
        with lock:
            rows[label][name] = result
        print(f"{label} {name}: {result}", flush=True)

    jobs = (("dead", lambda c: dead(c, args.minutes)), ("retry_after", retry_after))
    with ThreadPoolExecutor(4) as pool:
        futures = [
            pool.submit(run, label, code, name, job)
            for label, code in variants.items()
            for name, job in jobs
        ]
        for f in futures:
            f.result()
    common.write_report("policy", report(rows, args.minutes, command))
    common.write_headlines("policy", headlines(rows, args.minutes))


def headlines(rows: dict[str, dict], minutes: float) -> list[tuple[str, str]]:
    out = []
    for label, r in rows.items():
        d, a = r["dead"], r["retry_after"]
        out += [
            (f"{label}: a dead endpoint's attempts, first minute / {minutes:g} min",
             f"{d['first_minute']} / {d['attempts']}"),
            (f"{label}: 503 Retry-After for {DOWN_S:g} s: dead-lettered, delivered",
             f"{a['dead']}, {a['delivered']} of {EVENTS}"),
        ]  # fmt: skip
    return out


if __name__ == "__main__":
    main()
