"""A soak: the whole bus under random faults for minutes, and what it lost.

One Redis (AOF, appendfsync always), one `busbar web`, three `busbar worker`s and six
subscribers of one topic: fast; slow (50 ms an answer); flaky (a 500 to one request in
ten, retried after 200 ms); serial (`max: 1`, a batch per event); and two with ordering
keys: keyed (`concurrency: 8`, 20 ms an answer) and keyed_flaky (`concurrency: 4`,
`max: 1`, a 500 to one request in ten). Every event carries one of 40 keys. A steady
publisher (bulks of 5, about 90 events/s) runs for --minutes (default 5); every --every seconds
(default 10) one fault, dealt from a deck shuffled with --seed: kill -9, SIGTERM or
SIGSTOP (past the scrub window) of a worker, kill -9 or SIGTERM of Redis, kill -9 of
web (bench/soak_faults.py); what was stopped is started again. Then publishing and
faults stop, and the bus drains.

It exits 1 on what must never happen: an event answered 204 that a subscriber never
acknowledged; two requests in flight at once for one subscriber (for the keyed ones: two
holding one key); a key's events acknowledged out of publish order; an event delivered
twice other than by a whole batch sent again (a crash resends the batch it cut short,
unchanged; anything else is a bug); a worker that did not exit 0 on SIGTERM. Otherwise
it prints figures: events, repeats (at least once: what the faults cost), the longest
time publishing stood still, the faults dealt.

    .venv/bin/python -m bench.soak [--minutes 5] [--every 10] [--seed N] [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import random
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import common
from bench.soak_faults import FAULTS, Cast
from spec.conftest import ROOT_KEY
from spec.integration.bus import Bus, fast_scrub, web_env
from spec.integration.faults import (
    Publisher,
    key_overlaps,
    numbers,
    out_of_order,
    own_redis,
    replays,
)
from spec.integration.processes import free_port
from spec.integration.subscriber import Received, Subscriber, serving

COMMAND = ".venv/bin/python -m bench.soak"
SCRUB_AFTER_S = 3
WORKERS = 3
DRAIN_S = 300
KEYS = 40  # ordering keys the events carry: `k<i mod 40>`


def subscribers(rng: random.Random) -> dict[str, tuple[Subscriber, dict[str, Any]]]:
    """Each with its subscription's options."""

    def flaky(_: Received) -> tuple[int, float]:
        return (500 if rng.random() < 0.1 else 200), 0.0

    return {
        "fast": (Subscriber(), {"max": 20, "timeout": 100}),
        "slow": (Subscriber(responder=lambda _: (200, 0.05)), {"max": 10, "timeout": 200}),
        "flaky": (Subscriber(responder=flaky), {"max": 5, "timeout": 100}),
        "serial": (Subscriber(), {"max": 1, "timeout": 0}),
        "keyed": (Subscriber(responder=lambda _: (200, 0.02)),
                  {"max": 5, "timeout": 100, "concurrency": 8}),
        "keyed_flaky": (Subscriber(responder=flaky), {"max": 1, "timeout": 0, "concurrency": 4}),
    }  # fmt: skip


def deal(cast: Cast, rng: random.Random, until: float, every: float) -> list[tuple[str, str]]:
    """Faults until `until`, one every `every` seconds: (kind, what it hit). Dealt from
    a shuffled deck of every kind, shuffled again when used up, so that each kind comes
    as often as the others even in a short run."""
    dealt: list[tuple[str, str]] = []
    deck: list[str] = []
    while time.monotonic() + every < until:
        time.sleep(every)
        if not deck:
            deck = rng.sample(list(FAULTS), len(FAULTS))
        kind = deck.pop()
        detail = FAULTS[kind](cast, rng)
        print(f"  {time.strftime('%H:%M:%S')} {kind}: {detail}", flush=True)
        dealt.append((kind, f"{detail}, done at {time.strftime('%H:%M:%S')}"))
    time.sleep(max(0.0, until - time.monotonic()))
    return dealt


def drained(subs: dict[str, Subscriber], wanted: set[int]) -> float:
    """Seconds until every subscriber acknowledged every wanted event (DRAIN_S at most)."""
    started = time.monotonic()
    while time.monotonic() - started < DRAIN_S:
        if all(wanted <= numbers(sub) for sub in subs.values()):
            break
        time.sleep(0.2)
    return time.monotonic() - started


def soak(work: Path, minutes: float, every: float, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    cast_of = subscribers(random.Random(seed + 1))
    subs = {name: sub for name, (sub, _) in cast_of.items()}
    port = free_port()
    with ExitStack() as stack:
        own = stack.enter_context(own_redis(work / "redis", True, appendfsync="always"))
        env = {
            **web_env(own.url, port, BUSBAR_ALLOW_HTTP="1", BUSBAR_WEB_WORKERS="2"),
            **fast_scrub(SCRUB_AFTER_S * 1000),
            "BUSBAR_RETRY_FIRST_MS": "200",
            "BUSBAR_ATTEMPT_LOG": "100000",  # every attempt kept, to explain an overlap
            "BUSBAR_MAX_BACKOFF_MS": "2000",
            "BUSBAR_CIRCUIT_PROBE_MS": "2000",
        }
        for sub in subs.values():
            stack.enter_context(serving(sub))
        the_bus = Bus(f"http://127.0.0.1:{port}", env, work, stack)
        cast = Cast(own, the_bus, port, SCRUB_AFTER_S)
        cast.start_web()
        for _ in range(WORKERS):
            the_bus.start_worker()
        the_bus.client("pub")
        for name, (sub, options) in cast_of.items():
            the_bus.client(name)
            the_bus.subscribe(name, sub.url, ["orders"], **options)
        started = time.monotonic()
        with Publisher(the_bus.base, "pub", "orders", keys=KEYS) as publisher:
            dealt = deal(cast, rng, started + minutes * 60, every)
        ended = time.monotonic()
        wanted = set(publisher.acked)
        drain_s = drained(subs, wanted)
        listed = the_bus.call("GET", "/subscriptions", ROOT_KEY).json()
        queued = {s["name"]: s["events"]["queued"] for s in listed}
        tried = {s["name"]: {o: n for o, n in s["attempts"].items() if n} for s in listed}
        cut = {name: abandoned(the_bus, name) for name in subs}
        for worker in cast.alive_workers():  # a clean stop after all that
            worker.terminate()
            if (code := worker.wait(90)) != 0:
                cast.problems.append(f"worker {worker.pid} exited {code} at the end")
    return {
        "acked": len(wanted),
        "statuses": dict(publisher.statuses),
        "stall_s": publisher.longest_wait(started, ended),
        "drain_s": drain_s,
        "faults": dealt,
        "problems": cast.problems,
        "subscribers": {
            name: {
                **account(sub, wanted),
                "keyed": "concurrency" in cast_of[name][1],
                "queued": queued[name],
                "attempts": tried[name],
                "abandoned": cut[name],
            }
            for name, sub in subs.items()
        },
    }


def account(sub: Subscriber, wanted: set[int]) -> dict[str, Any]:
    found = replays(sub)
    return {
        "lost": len(wanted - numbers(sub)),
        "requests": len(sub.received),
        "refused": sum(1 for r in sub.received if r.status >= 300),
        "repeated": found.events,
        "repeated_batches": len(found.batches),
        "partial": found.partial,
        "max_in_flight": sub.max_in_flight,
        "overlaps": overlaps(sub),
        "key_overlaps": key_overlaps(sub),
        "out_of_order": out_of_order(sub),
    }


def abandoned(the_bus: Bus, name: str) -> list[str]:
    """The attempts a scrub gave back (their worker taken for dead), when and whose."""
    page = the_bus.call("GET", f"/subscribers/{name}/attempts?outcome=abandoned&limit=1000",
                        ROOT_KEY).json()  # fmt: skip
    return [
        f"{time.strftime('%H:%M:%S', time.gmtime(a['at'] / 1000))}.{a['at'] % 1000:03d} "
        f"batch {a['batch']} attempt {a['attempt']} of {a['worker']}"
        for a in page.get("attempts", [])
    ]


def overlaps(sub: Subscriber) -> list[str]:
    """Requests the subscriber was still answering when the next came, each pair told:
    whether the second is the same batch again (a timed-out or cut-short attempt
    retried) or another, and how long the first had been in flight."""
    found = []
    done = sorted(sub.received, key=lambda r: r.started)
    for a, b in itertools.pairwise(done):
        if b.started < a.ended:
            same = a.headers.get("webhook-id") == b.headers.get("webhook-id")
            found.append(
                f"at {time.strftime('%H:%M:%S', time.gmtime(a.at))}.{int(a.at * 1000) % 1000:03d}"
                f" {a.headers.get('webhook-id')} ({a.status}, {len(a.events)} events) in flight "
                f"{(b.started - a.started) * 1000:.0f} ms of {(a.ended - a.started) * 1000:.0f}"
                f" when {'the same batch came again' if same else b.headers.get('webhook-id')}"
            )
    return found


def failures(result: dict[str, Any]) -> list[str]:
    """What must never happen, as sentences; empty when the soak passed."""
    found = list(result["problems"])
    for name, a in result["subscribers"].items():
        if a["lost"]:
            found.append(
                f"{name}: {a['lost']} events answered 204 not delivered in {DRAIN_S} s "
                f"({a['queued']} still queued)"
            )
        if a["key_overlaps"]:
            found.append(f"{name}: two requests in flight held one key: {a['key_overlaps'][:5]}")
        if a["out_of_order"]:
            found.append(f"{name}: a key's events out of order: {a['out_of_order'][:5]}")
        if a["max_in_flight"] > 1 and not a["keyed"]:
            found.append(
                f"{name}: {a['max_in_flight']} requests in flight at once (attempts "
                f"{a['attempts']}; {'; '.join(a['overlaps'][:5])}; abandoned: "
                f"{'; '.join(a['abandoned'][:30])})"
            )
        if a["partial"]:
            found.append(f"{name}: {a['partial']} events repeated outside a whole batch")
    return found


def report(command: str, seed: int, result: dict[str, Any]) -> str:
    kinds = Counter(kind for kind, _ in result["faults"])
    bad = failures(result)
    return "\n".join([
        "# Soak: the bus under random faults",
        "",
        f"`{command}` from the repository root (seed {seed}); {common.machine()}.",
        "",
        f"{result['acked']:,} events answered 204 ({result['statuses']}), "
        f"{len(result['faults'])} faults: "
        + ", ".join(f"{kind} x{n}" for kind, n in kinds.most_common()) + ". "
        f"Publishing stood still at most {result['stall_s']:.1f} s; after the last "
        f"fault every subscriber had everything within {result['drain_s']:.1f} s.",
        "",
        "| subscriber | lost | still queued | requests | refused (500) | events repeated "
        "| in batches resent whole | repeated otherwise | most in flight |",
        "|---|---|---|---|---|---|---|---|---|",
        *[
            f"| {name} | {a['lost']} | {a['queued']} | {a['requests']:,} | {a['refused']:,} | "
            f"{a['repeated']:,} | {a['repeated_batches']:,} | {a['partial']} | "
            f"{a['max_in_flight']} |"
            for name, a in result["subscribers"].items()
        ],
        "",
        ("**Failed:** " + "; ".join(bad)) if bad else
        "Nothing acknowledged was lost, no subscriber of concurrency 1 ever had two "
        "requests in flight, the keyed ones never two holding one key and every key's "
        "events arrived in publish order, and every repeat was a whole batch sent again.",
        "",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.soak", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--every", type=float, default=10.0, help="seconds between faults")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="1 minute, a fault every 8 s")
    args = parser.parse_args(argv)
    minutes, every = (1.0, 8.0) if args.quick else (args.minutes, args.every)
    with tempfile.TemporaryDirectory(prefix="busbar-soak-") as tmp:
        result = soak(Path(tmp), minutes, every, args.seed)
    command = COMMAND + (" --quick" if args.quick else f" --minutes {minutes:g} --seed {args.seed}")
    common.write_report("soak", report(command, args.seed, result))
    if failures(result):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
