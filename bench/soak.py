"""A soak: the whole bus under random faults for minutes, and what it lost.

One Redis (AOF, appendfsync always), one `busbar web`, three `busbar worker`s and seven
subscribers of one topic: fast; slow (50 ms an answer); flaky (a 500 to one request in
ten, retried after 200 ms); serial (`max: 1`, a batch per event); two with ordering
keys: keyed (`concurrency: 8`, 20 ms an answer) and keyed_flaky (`concurrency: 4`,
`max: 1`, a 500 to one request in ten); and shaped (`concurrency: 4`, a route whose
transform adds a field to every event, a 500 to one request in ten: every event must
arrive shaped). Every event carries one of 40 keys. A steady
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
time publishing stood still (overall, and for each kind of fault), the faults dealt.

With --cluster (as root) the same runs on a Redis Cluster of three masters with a
replica each (--replicas; AOF, fsync always), BUSBAR_REDIS_MIN_REPLICAS=1
(--min-replicas), two
webs taking the publishes in turn and three workers, each node and each worker in a
network namespace of its own, and the faults of bench.soak_cluster in place of the
one-Redis ones: kill -9, SIGSTOP and a partition of a master, CLUSTER FAILOVER, a worker
cut off from Redis. It also fails on a 503 that does not say Retry-After.

    .venv/bin/python -m bench.soak [--minutes 5] [--every 10] [--seed N] [--quick]
        [--cluster [--min-replicas N] [--replicas N]]
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import common
from bench.netns import BRIDGE_IP, SUBNET, Network, inside
from bench.soak_cluster import CLUSTER_FAULTS, ClusterCast
from bench.soak_faults import FAULTS, Cast, Fault
from config.settings import DEV_CALLBACK_ALLOW
from dev import cluster as local
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
from spec.integration.layouts import CLUSTER_SHARDS
from spec.integration.processes import free_port
from spec.integration.subscriber import Received, Subscriber, serving

COMMAND = ".venv/bin/python -m bench.soak"
SCRUB_AFTER_S = 3
WORKERS = 3
DRAIN_S = 300
KEYS = 40  # ordering keys the events carry: `k<i mod 40>`
BUS_ENV = {
    **fast_scrub(SCRUB_AFTER_S * 1000),
    "BUSBAR_RETRY_FIRST_MS": "200",
    "BUSBAR_ATTEMPT_LOG": "100000",  # every attempt kept, to explain an overlap
    "BUSBAR_MAX_BACKOFF_MS": "2000",
    "BUSBAR_CIRCUIT_PROBE_MS": "2000",
}
QUICK_CLUSTER = ["cut a master off", "kill -9 a master"]
Faults = dict[str, Fault]
Dealt = tuple[str, str, float, float]  # kind, what it hit, began, over (monotonic)


# a route whose transform shapes every event at delivery (docs/transforms.md): each must
# arrive shaped, whatever the faults met its batch
SHAPED = {"topic": "orders", "transform": "$merge([data, {'via': 'transform'}])"}


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
        "shaped": (Subscriber(responder=flaky), {"max": 5, "timeout": 100, "concurrency": 4,
                                                 "topics": [SHAPED]}),
    }  # fmt: skip


def deal(
    cast: Cast, faults: Faults, rng: random.Random, until: float, every: float, first: list[str]
) -> list[Dealt]:
    """Faults until `until`, one every `every` seconds: (kind, what it hit, when it
    began, when it was over). The kinds `first` come first, then the rest are dealt
    from a shuffled deck of every kind, shuffled again when used up, so that each kind
    comes as often as the others even in a short run."""
    dealt: list[Dealt] = []
    deck: list[str] = list(reversed(first))
    while time.monotonic() + every < until:
        time.sleep(every)
        if not deck:
            deck = rng.sample(list(faults), len(faults))
        kind, began, wall = deck.pop(), time.monotonic(), time.strftime("%H:%M:%S")
        detail = faults[kind](cast, rng)
        print(f"  {wall} {kind}: {detail}", flush=True)
        told = f"{wall}-{time.strftime('%H:%M:%S')} {kind}: {detail}"
        dealt.append((kind, told, began, time.monotonic()))
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


def single(stack: ExitStack, work: Path, subs: dict[str, Subscriber]) -> tuple[Cast, Faults]:
    """One Redis (AOF, fsync always), one web and the workers; the one-Redis faults."""
    own = stack.enter_context(own_redis(work / "redis", True, appendfsync="always"))
    port = free_port()
    env = {**web_env(own.url, port, BUSBAR_ALLOW_HTTP="1", BUSBAR_WEB_WORKERS="2"), **BUS_ENV}
    for sub in subs.values():
        stack.enter_context(serving(sub))
    cast = Cast(Bus(f"http://127.0.0.1:{port}", env, work, stack), [port], SCRUB_AFTER_S, own)
    cast.start_web(0)
    for _ in range(WORKERS):
        cast.start_worker()
    return cast, FAULTS


def clustered(
    stack: ExitStack, work: Path, subs: dict[str, Subscriber], durable: tuple[int, int]
) -> tuple[Cast, Faults]:
    """Three masters with `durable`[0] replicas each, BUSBAR_REDIS_MIN_REPLICAS
    `durable`[1], two webs, the workers, every node and worker in a network of its own
    (bench.netns); the process faults and the cluster's."""
    replicas, min_replicas = durable
    net = Network()
    stack.callback(net.close)
    node_hosts = [net.host(f"n{i}") for i in range(3 * (1 + replicas))]
    options = {"appendfsync": "always", "protected-mode": "no"}  # reached from other networks
    cluster = local.start(work / "cluster", 3, replicas, options=options,
                          places=[(h.ip, h.prefix) for h in node_hosts])  # fmt: skip
    stack.callback(cluster.stop)
    ports = [free_port(), free_port()]
    env = {
        **web_env(cluster.url, ports[0], BUSBAR_ALLOW_HTTP="1", BUSBAR_WEB_WORKERS="1"),
        **BUS_ENV,
        "BUSBAR_REDIS_CLUSTER": "1",
        "BUSBAR_SHARDS": str(CLUSTER_SHARDS),
        "BUSBAR_REDIS_MIN_REPLICAS": str(min_replicas),
        "BUSBAR_CALLBACK_ALLOW": f"{DEV_CALLBACK_ALLOW}, {SUBNET}.0/24",
    }
    for sub in subs.values():  # on the bridge, where the workers' networks reach
        stack.enter_context(serving(sub, host=BRIDGE_IP))
    cast = ClusterCast(
        Bus(f"http://127.0.0.1:{ports[0]}", env, work, stack), ports, SCRUB_AFTER_S,
        cluster=cluster, net=net, nodes_at={n.port: h for n, h in zip(cluster.nodes,
        node_hosts, strict=True)}, free_hosts=[net.host(f"w{i}") for i in range(WORKERS)],
        replicas=replicas,
    )  # fmt: skip
    for i in range(len(ports)):
        cast.start_web(i)
    for _ in range(WORKERS):
        cast.start_worker()
    return cast, CLUSTER_FAULTS


def soak(
    work: Path, minutes: float, every: float, seed: int, cluster: tuple[int, int] | None
) -> dict[str, Any]:
    """The soak; `cluster` is None for one Redis, else (replicas a master,
    BUSBAR_REDIS_MIN_REPLICAS). A short cluster soak (under 3 minutes) deals a master's
    partition and a master's kill -9 first, whatever the seed."""
    rng = random.Random(seed)
    cast_of = subscribers(random.Random(seed + 1))
    subs = {name: sub for name, (sub, _) in cast_of.items()}
    with ExitStack() as stack:
        cast, faults = (
            single(stack, work, subs) if cluster is None else clustered(stack, work, subs, cluster)
        )
        the_bus = cast.bus
        the_bus.client("pub")
        for name, (sub, options) in cast_of.items():
            the_bus.client(name)
            topics = options.get("topics", ["orders"])
            the_bus.subscribe(name, sub.url, topics, **{k: v for k, v in options.items()
                                                        if k != "topics"})  # fmt: skip
        started = time.monotonic()
        bases = [f"http://127.0.0.1:{port}" for port in cast.ports]
        with Publisher(bases, "pub", "orders", keys=KEYS) as publisher:
            first = QUICK_CLUSTER if cluster is not None and minutes < 3 else []
            dealt = deal(cast, faults, rng, started + minutes * 60, every, first)
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
        "unhinted_503": publisher.unhinted_503,
        "stall_s": publisher.longest_wait(started, ended),
        "stalls": stalls(publisher, dealt),
        "drain_s": drain_s,
        "faults": [(kind, detail) for kind, detail, _, _ in dealt],
        "problems": cast.problems,
        "subscribers": {
            name: {
                **account(sub, wanted),
                "keyed": "concurrency" in cast_of[name][1],
                "unshaped": unshaped(sub) if "topics" in cast_of[name][1] else 0,
                "queued": queued[name],
                "attempts": tried[name],
                "abandoned": cut[name],
            }
            for name, sub in subs.items()
        },
    }


def unshaped(sub: Subscriber) -> int:
    """Events a subscriber of SHAPED received without its transform's field."""
    return sum(1 for e in sub.delivered if e["data"].get("via") != "transform")


def stalls(publisher: Publisher, dealt: list[Dealt]) -> dict[str, float]:
    """For each kind of fault, the longest publishing stood still while one was dealt
    (from its start until the bus was whole again)."""
    found: dict[str, float] = {}
    for kind, _, since, until in dealt:
        found[kind] = max(found.get(kind, 0.0), publisher.longest_wait(since, until))
    return found


def account(sub: Subscriber, wanted: set[int]) -> dict[str, Any]:
    found = replays(sub)
    return {
        "lost": len(wanted - numbers(sub)),
        "requests": len(sub.received),
        "refused": sum(1 for r in sub.received if r.status >= 300),
        "repeated": found.events,
        "repeated_batches": len(found.batches),
        "partial": found.partial,
        "partial_told": found.told,
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
    if result["unhinted_503"]:
        found.append(f"{result['unhinted_503']} answers 503 did not say Retry-After")
    for name, a in result["subscribers"].items():
        if a["lost"]:
            found.append(
                f"{name}: {a['lost']} events answered 204 not delivered in {DRAIN_S} s "
                f"({a['queued']} still queued)"
            )
        if a["key_overlaps"]:
            found.append(f"{name}: two requests in flight held one key: {a['key_overlaps'][:5]}")
        if a.get("unshaped"):
            found.append(f"{name}: {a['unshaped']} events delivered without their transform")
        if a["out_of_order"]:
            found.append(f"{name}: a key's events out of order: {a['out_of_order'][:5]}")
        if a["max_in_flight"] > 1 and not a["keyed"]:
            found.append(
                f"{name}: {a['max_in_flight']} requests in flight at once (attempts "
                f"{a['attempts']}; {'; '.join(a['overlaps'][:5])}; abandoned: "
                f"{'; '.join(a['abandoned'][:30])})"
            )
        if a["partial"]:
            found.append(
                f"{name}: {a['partial']} events repeated outside a whole batch: "
                f"{'; '.join(a['partial_told'][:5])}"
            )
    return found


def report(command: str, seed: int, result: dict[str, Any]) -> str:
    kinds = Counter(kind for kind, _ in result["faults"])
    bad = failures(result)
    return "\n".join([
        "# Soak: the bus under random faults"
        + (" on a Redis Cluster, with partitions" if "--cluster" in command else ""),
        "",
        f"`{command}` from the repository root (seed {seed}); {common.machine()}.",
        "",
        f"{result['acked']:,} events answered 204 ({result['statuses']}), "
        f"{len(result['faults'])} faults: "
        + ", ".join(f"{kind} x{n}" for kind, n in kinds.most_common()) + ". "
        f"Publishing stood still at most {result['stall_s']:.1f} s; after the last "
        f"fault every subscriber had everything within {result['drain_s']:.1f} s. "
        f"503s without Retry-After: {result['unhinted_503']}.",
        "",
        "| fault | dealt | longest publishing stood still while it lasted (s) |",
        "|---|---|---|",
        *[f"| {kind} | {kinds[kind]} | {stall:.1f} |" for kind, stall in result["stalls"].items()],
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
        "Faults, in order (UTC):",
        "",
        *[f"- {told}" for _, told in result["faults"]],
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
    parser.add_argument(
        "--cluster", action="store_true", help="on a Redis Cluster, with its faults (root)"
    )
    parser.add_argument(
        "--min-replicas", type=int, default=1, help="BUSBAR_REDIS_MIN_REPLICAS (--cluster)"
    )
    parser.add_argument("--replicas", type=int, default=1, help="a master's (--cluster)")
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep the processes' logs in this directory"
    )
    args = parser.parse_args(argv)
    if args.cluster:  # in a network of its own, re-executed once
        inside(["-m", "bench.soak", *(sys.argv[1:] if argv is None else argv)])
    minutes, every = (1.0, 8.0) if args.quick else (args.minutes, args.every)
    with tempfile.TemporaryDirectory(prefix="busbar-soak-") as tmp:
        durable = (args.replicas, args.min_replicas)
        where = Path(tmp) if args.keep is None else args.keep
        where.mkdir(parents=True, exist_ok=True)
        result = soak(where, minutes, every, args.seed, durable if args.cluster else None)
    command = COMMAND + (" --quick" if args.quick else f" --minutes {minutes:g} --seed {args.seed}")
    if args.cluster:
        command += (
            " --cluster"
            + (f" --min-replicas {args.min_replicas}" if args.min_replicas != 1 else "")
            + (f" --replicas {args.replicas}" if args.replicas != 1 else "")
        )
    name = "soak-cluster" if args.cluster else "soak"  # a variant's run in its own file
    if args.cluster and (args.min_replicas, args.replicas) != (1, 1):
        name += f"-replicas{args.replicas}-min{args.min_replicas}"
    common.write_report(name, report(command, args.seed, result))
    if failures(result):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
