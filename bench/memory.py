"""Redis memory per queued event: valkey's INFO used_memory before and after N events
published through `busbar web` (no worker, so they all stay queued), next to the raw
msgpack of the same events (app.codec.pack_event, what a queued entry holds after its
`<expires_at>|` prefix). The difference is busbar's layout: list nodes, batch headers,
lane lists, the batch index, and for coalescing routes the url map.

    .venv/bin/python -m bench.memory [--quick]
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from app.codec import pack_event
from bench import common
from bench.common import Bus

BULK = 500
ENV = {"BUSBAR_REDIS_MAX_MEM": str(1 << 30)}
COMMAND = ".venv/bin/python -m bench.memory"
CASES: dict[str, tuple[bool, int, bool]] = {  # name: (with data, max, coalescing route)
    "no data, max 100": (False, 100, False),
    "data (3 fields), max 100": (True, 100, False),
    "data (3 fields), max 10": (True, 10, False),
    "data (3 fields), max 100, coalescing route (urls all new)": (True, 100, True),
}


def event(i: int, with_data: bool) -> dict[str, Any]:
    """An order-like event; urls are all different, as distinct objects are."""
    url = f"https://shop.example.com/orders/{i:08d}"
    data = {"id": i, "status": "paid", "total": 1234 + i % 1000} if with_data else None
    return {"type": "update", "url": url} | ({"data": data} if data else {})


def used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def measure(the_bus: Bus, client: redis.Redis, case: str, count: int) -> dict[str, float]:
    """Bytes per event in valkey, and of the same events as msgpack and as JSON."""
    with_data, max_events, coalesce = CASES[case]
    topic = common.topic_name(f"m{list(CASES).index(case)}")
    sub = the_bus.client("sub")
    sub.call("DELETE", "/subscriber")  # what the previous case queued leaves first
    route = {"topic": topic, "coalesce": coalesce}
    body = {"topics": [route], "callback": "http://127.0.0.1:9/in", "max": max_events}
    sub.ok("POST", "/subscription", body)
    events = [event(i, with_data) for i in range(count)]
    now = int(time.time() * 1000)
    packed = sum(len(pack_event(topic, e["type"], e["url"], now, e.get("data"))) for e in events)
    as_json = sum(len(json.dumps(e, separators=(",", ":"))) for e in events)
    before = used(client)
    with contextlib.closing(the_bus.api("pub")) as pub:
        for i in range(0, count, BULK):
            pub.ok("POST", f"/topics/{topic}", events[i : i + BULK])
    after = used(client)
    queued = int(client.hget(the_bus.keys.home("sub").event_gauge, "sub") or 0)
    sub.call("DELETE", "/subscriber")
    sub.close()
    if queued != count:
        raise RuntimeError(f"{case}: {queued} of {count} events queued")
    return {"redis": (after - before) / count, "msgpack": packed / count, "json": as_json / count}


def report(command: str, runs: dict[str, list[dict]], count: int, rounds: int) -> str:
    lines = [
        "# Redis memory per queued event",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        f"{count:,} events per case published through `busbar web` in POSTs of {BULK} to a "
        "topic with one subscriber and no worker, so all stay queued; valkey (pip wheel) "
        "INFO `used_memory` before and after, divided by the events. msgpack: "
        "`app.codec.pack_event` of the same events (topic, type, url, timestamp, data), "
        "the bytes a queued entry holds after its `<expires_at>|` prefix. JSON: the event "
        f"as published. Urls are all distinct (`https://shop.example.com/orders/NNNNNNNN`). "
        f"Median (min-max) of {rounds} round(s); the ratio is taken per round.",
        "",
        "| case | valkey bytes/event | msgpack bytes/event | valkey / msgpack "
        "| overhead bytes/event | JSON bytes/event |",
        "|---|---|---|---|---|---|",
    ]
    for case, got in runs.items():
        redis_b, packed = [r["redis"] for r in got], [r["msgpack"] for r in got]
        ratio = [a / b for a, b in zip(redis_b, packed, strict=True)]
        lines.append(
            f"| {case} | {common.spread(redis_b, '{:,.1f}')} | {common.spread(packed, '{:.1f}')} "
            f"| {common.spread(ratio, '{:.2f}')} "
            f"| {common.spread([a - b for a, b in zip(redis_b, packed, strict=True)], '{:.1f}')} "
            f"| {common.spread([r['json'] for r in got], '{:.1f}')} |"
        )
    per_mib = 2**20 / min(r["redis"] for r in runs["data (3 fields), max 100"])
    lines += [
        "",
        f"At that rate, 1 MiB of Redis holds about {per_mib:,.0f} queued events with data; "
        "the default BUSBAR_REDIS_MAX_MEM (50 MiB) less BUSBAR_REDIS_MIN_FREE (10 MiB) "
        f"about {per_mib * 40:,.0f} before Autodrop starts shedding.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    quick = common.quick_flag("bench.memory", __doc__, argv)
    count, rounds = (10_000, 1) if quick else (100_000, 3)
    runs: dict[str, list[dict]] = {case: [] for case in CASES}
    with (
        tempfile.TemporaryDirectory(prefix="busbar-bench-") as work,
        common.web_bus(Path(work), env=ENV) as the_bus,
        redis.Redis.from_url(the_bus.redis_url) as client,
    ):
        the_bus.client("pub").close()
        measure(the_bus, client, "no data, max 100", 1_000)  # warm-up: scripts, pools
        for r in range(rounds):
            for case in CASES:
                runs[case].append(measure(the_bus, client, case, count))
                print(f"round {r} {case}: {runs[case][-1]}", flush=True)
    command = COMMAND + (" --quick" if quick else "")
    common.write_report("memory", report(command, runs, count, rounds))
    default = runs["data (3 fields), max 100"]
    common.write_headlines("memory", [
        ("valkey bytes per queued event (data, max 100)",
         common.spread([r["redis"] for r in default], "{:.0f}")),
        ("valkey / raw msgpack",
         common.spread([r["redis"] / r["msgpack"] for r in default], "{:.2f}")),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
