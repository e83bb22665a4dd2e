"""End-to-end delivery benchmark: Redis, `busbar web` and one `busbar worker` as real
processes, publishing over HTTP to a local subscriber that counts what arrives.

Throughput is timed from the first publish to the last event received, publishing in
bulk while the worker delivers, because that overlap is how a bus runs in production.
Latency is measured at a steady offered load by paced single-event publishes; each event
carries its send time, and the batching wait a subscriber asked for (its `timeout`, or
the time its batch took to fill to `max`) is subtracted, leaving what busbar adds.

    .venv/bin/python -m bench.delivery
"""

from __future__ import annotations

import itertools
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import common
from bench.common import Api, Bus, Sink

ROUNDS = 3
BULK = 500  # events per publish POST in the throughput runs
PUBLISHED = {1: 100_000, 50: 2_000}  # events published per run, by number of subscribers
SECONDS = 5.0  # length of one latency run
PUBLISHERS = 8  # client threads sharing the paced schedule (a publish takes a few ms)
WAIT_S = 60.0  # most a run waits for the last event before giving up (bounded runtime)
LATENCY_CASES = {  # name: (max, timeout ms, offered events/s); 250/s: below max 1's ceiling
    "max 1, timeout 0, 1,000/s": (1, 0, 1_000),
    "max 100, timeout 500 (defaults), 1,000/s": (100, 500, 1_000),
    "max 1, timeout 0, 250/s": (1, 0, 250),
}
ENV = {"BUSBAR_WORKER_THREADS": "5", "BUSBAR_REDIS_MAX_MEM": str(1 << 30)}
COMMAND = ".venv/bin/python -m bench.delivery"


def subscribe(the_bus: Bus, sink: Sink, name: str, topic: str, **opts: int) -> Api:
    """A new client subscribed to `topic` with its own callback path on the sink."""
    api = the_bus.client(name)
    body = {"topics": [topic], "callback": f"http://127.0.0.1:{sink.port}/{name}", **opts}
    api.ok("POST", "/subscription", body)
    return api


def cpu(the_bus: Bus, sink: Sink) -> dict[str, float]:
    """CPU seconds so far of each process taking part, to show where the time goes."""
    return {
        **the_bus.cpu(),
        "subscriber": common.cpu_seconds(sink.process.pid),
        "publisher (bench)": common.cpu_seconds(os.getpid(), tree=False),
    }


def per_event_us(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
    return {k: (after[k] - before.get(k, 0.0)) / max(n, 1) * 1e6 for k in after}


def topic_name(tag: str) -> str:
    """Topic names are `^[a-z_]{1,64}$`: the run's tag with its digits spelled as letters."""
    return "t_" + tag.translate(str.maketrans("0123456789", "abcdefghij"))


def events(n: int) -> list[dict[str, Any]]:
    return [{"type": "create", "url": f"https://o.test/{i}"} for i in range(n)]


def throughput(the_bus: Bus, sink: Sink, subs: int, published: int, tag: str) -> dict[str, Any]:
    """Delivered events/s with `subs` subscribers of one topic, max 100, timeout 0."""
    topic = topic_name(f"p{tag}")
    publisher = the_bus.client(f"pub{tag}")
    apis = [subscribe(the_bus, sink, f"s{tag}-{i}", topic, max=100, timeout=0) for i in range(subs)]
    sink.take()
    expected, start_count = published * subs, sink.received
    body = events(BULK)
    cpu0, t0, snap = cpu(the_bus, sink), time.perf_counter(), common.others()
    publish_s: list[float] = []

    def publish() -> None:
        for _ in range(published // BULK):
            publisher.ok("POST", f"/topics/{topic}", body)
        publish_s.append(time.perf_counter() - t0)

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    complete = sink.wait_for(start_count + expected, WAIT_S)
    elapsed = time.perf_counter() - t0
    thread.join(WAIT_S)
    cpu1, got = cpu(the_bus, sink), sink.received - start_count
    per_path: dict[str, int] = {}
    for _, path, stamps in sink.take():
        per_path[path] = per_path.get(path, 0) + len(stamps)
    for api in [*apis, publisher]:
        api.call("DELETE", "/subscriber")
        api.close()
    return {
        "rate": got / elapsed,
        "complete": complete and list(per_path.values()) == [published] * subs,
        "publish_rate": published / publish_s[0] if publish_s else 0.0,
        "cpu_us": per_event_us(cpu0, {**cpu1, "others": common.others_since(snap)}, got),
    }


def added_latency(records: list[common.Record], max_events: int, timeout: int) -> list[float]:
    """Per event: receive time minus when its batch became due (full, or timed out)."""
    added = []
    for at, _, stamps in records:
        due = max(stamps) if len(stamps) >= max_events else min(stamps) + timeout
        added += [at - due] * len(stamps)
    return added


def latency(the_bus: Bus, sink: Sink, tag: str, case: tuple[int, int, int]) -> dict[str, Any]:
    """Paced single-event publishes at `rate`/s for SECONDS; per-event latencies."""
    max_events, timeout, rate = case
    topic, count = topic_name(f"l{tag}"), int(rate * SECONDS)
    publisher = the_bus.client(f"pub{tag}")
    sub = subscribe(the_bus, sink, f"s{tag}", topic, max=max_events, timeout=timeout)
    sink.take()
    start_count, schedule = sink.received, itertools.count()
    late: list[float] = []
    cpu0, start, snap = cpu(the_bus, sink), time.perf_counter() + 0.05, common.others()
    wall0 = time.time() * 1e3 + 50

    def run() -> None:
        api = the_bus.api(f"pub{tag}")
        while (i := next(schedule)) < count:
            behind = time.perf_counter() - (start + i / rate)
            if behind < 0:
                time.sleep(-behind)
            late.append(max(0.0, behind))
            event = {
                "type": "create",
                "url": f"https://o.test/{i}",
                "data": {"s": time.time() * 1e3},
            }
            api.ok("POST", f"/topics/{topic}", event)
        api.close()

    threads = [threading.Thread(target=run, daemon=True) for _ in range(PUBLISHERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(SECONDS + WAIT_S)
    sent_s = time.perf_counter() - start
    complete = sink.wait_for(start_count + count, WAIT_S)
    cpu1, records = cpu(the_bus, sink), sink.take()
    raw = [at - s for at, _, stamps in records for s in stamps]
    added = added_latency(records, max_events, timeout)
    for api in (sub, publisher):
        api.call("DELETE", "/subscriber")
        api.close()
    return {
        "complete": complete,
        "achieved": count / sent_s,
        "delivered": len(raw) / (max(at for at, _, _ in records) - wall0) * 1e3,
        "cpu_us": per_event_us(cpu0, {**cpu1, "others": common.others_since(snap)}, len(raw)),
        "late_p99": common.pct(late, 99) * 1e3,
        "raw": (common.pct(raw, 50), common.pct(raw, 99)),
        "added": (common.pct(added, 50), common.pct(added, 99)),
    }


def report(tp: dict[int, list[dict]], lat: dict[str, list[dict]], drops: dict, others: str) -> str:
    """The markdown kept in bench/results/delivery.md."""
    lines = [
        "# Delivery benchmark",
        "",
        f"`{COMMAND}` from the repository root; {common.machine()}.",
        "",
        f"Medians of {ROUNDS} rounds (min-max). One `busbar worker` (5 delivery threads), "
        "`busbar web` with its defaults (2 gunicorn processes x 8 threads), valkey from the "
        "pip wheel, subscriber: stdlib ThreadingHTTPServer (HTTP/1.1 keep-alive) in its own "
        "process, all on the same machine over loopback. BUSBAR_REDIS_MAX_MEM is raised to "
        "1 GiB so that Autodrop never sheds the backlog of a run.",
        "",
        "## Throughput (max 100, timeout 0; publishing in POSTs of 500 events meanwhile)",
        "",
        "| subscribers | events | delivered events/s | publish events/s accepted "
        "| all delivered exactly once |",
        "|---|---|---|---|---|",
    ]
    for subs, runs in tp.items():
        exact = "yes" if all(r["complete"] for r in runs) else "NO"
        lines.append(
            f"| {subs} | {PUBLISHED[subs]:,} x {subs} | {common.spread([r['rate'] for r in runs])} "
            f"| {common.spread([r['publish_rate'] for r in runs])} | {exact} |"
        )
    lines += [
        "",
        f"## Latency at a steady offered load ({SECONDS:.0f} s per run, single-event "
        f"publishes from {PUBLISHERS} paced client threads)",
        "",
        "Raw: publish sent -> subscriber received. Added: received minus when the event's "
        "batch became due (when the last event of a full batch was sent, else first + "
        "timeout), i.e. latency minus the batching wait. Delivered/s: events received over "
        "first send -> last receive; below the offered rate means a growing backlog.",
        "",
        "| subscriber | offered/s achieved | delivered/s | publisher late p99 ms | raw p50 ms "
        "| raw p99 ms | added p50 ms | added p99 ms | all arrived |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for case, runs in lat.items():
        cells = [common.spread([r[k] for r in runs]) for k in ("achieved", "delivered")]
        cells.append(common.spread([r["late_p99"] for r in runs], "{:.1f}"))
        cells += [
            common.spread([r[k][j] for r in runs], "{:.1f}")
            for k in ("raw", "added")
            for j in (0, 1)
        ]
        ok = "yes" if all(r["complete"] for r in runs) else "NO"
        lines.append(f"| {case} | " + " | ".join(cells) + f" | {ok} |")
    lines += ["", "## CPU per delivered event (microseconds, median of rounds)", ""]
    lines += [f"`others`: every process outside the benchmark. {others}", ""]
    lines += common.median_table(
        "cpu_us", {**{f"throughput, {n} subscriber(s)": r for n, r in tp.items()}, **lat}
    )
    lines += [
        f"\nEvents dropped or expired by busbar during the benchmark: {drops or 'none'}\n",
    ]
    return "\n".join(lines)


def main() -> None:
    tp: dict[int, list[dict]] = {subs: [] for subs in PUBLISHED}
    lat: dict[str, list[dict]] = {case: [] for case in LATENCY_CASES}
    snap, started = common.others(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="busbar-bench-") as work:
        sink = Sink()
        try:
            with common.bus(Path(work), **ENV) as the_bus:
                throughput(the_bus, sink, 1, 5_000, "warm")  # connections, imports, scripts
                for r in range(ROUNDS):
                    for subs, published in PUBLISHED.items():
                        tp[subs].append(throughput(the_bus, sink, subs, published, f"{r}x{subs}"))
                        print(f"round {r} throughput {subs}: {tp[subs][-1]}", flush=True)
                    for i, (case, spec) in enumerate(LATENCY_CASES.items()):
                        lat[case].append(latency(the_bus, sink, f"{r}l{i}", spec))
                        print(f"round {r} latency {case}: {lat[case][-1]}", flush=True)
                drops = the_bus.dropped()
        finally:
            sink.stop()
    spent, took = common.others_since(snap), time.perf_counter() - started
    others = f"They used {spent:.1f} CPU-seconds during the benchmark's {took:.0f} s."
    common.write_report("delivery", report(tp, lat, drops, others))


if __name__ == "__main__":
    main()
