"""Redis memory per queued event: valkey's INFO used_memory before and after N events
published through `busbar web` (no worker, so they all stay queued), next to the raw
msgpack of the same events (app.codec.pack_event, what a queued entry holds after its
`<expires_at>|` prefix). The difference is busbar's layout: list nodes, batch headers,
lane lists, the batch index, and for coalescing routes the url map. Payloads from none
to BUSBAR_MAX_EVENT_DATA's default (256 KiB): what users send, not only Routemaster's
64 bytes.

    .venv/bin/python -m bench.memory [--quick]
"""

from __future__ import annotations

import contextlib
import functools
import json
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import redis

from app.codec import pack_data, pack_event
from bench import common
from bench.common import Bus

BULK = 500  # events per POST at most ...
BODY = 900_000  # ... and bytes of JSON: under BUSBAR_MAX_BODY_BYTES (1 MiB)
CASE_BYTES = 16 << 20  # msgpack a case with a payload queues, about (events: fewer)
ENV = {"BUSBAR_REDIS_MAX_MEM": str(1 << 30)}
COMMAND = ".venv/bin/python -m bench.memory"


class Case(NamedTuple):
    data: int | None  # None: no data; 0: three small fields; n: an order of about n bytes
    max_events: int
    coalesce: bool = False


CASES: dict[str, Case] = {
    "no data, max 100": Case(None, 100),
    "data (3 fields), max 100": Case(0, 100),
    "data (3 fields), max 10": Case(0, 10),
    "data (3 fields), max 100, coalescing route (urls all new)": Case(0, 100, True),
    "data 1 KiB, max 100": Case(1024, 100),
    "data 10 KiB, max 100": Case(10 * 1024, 100),
    "data 256 KiB, max 100": Case(256 * 1024, 100),
}
DEFAULT = "data (3 fields), max 100"


@functools.cache
def items(size: int) -> list[dict[str, Any]]:
    """Line items that take an order to about `size` bytes of msgpack (shared by every
    event of a case: their bytes are what is measured, not their variety)."""
    line = {"sku": "SKU-0000000", "name": "Blue cotton shirt, size M", "qty": 2, "price": 1999}
    found = [{**line, "sku": f"SKU-{n:07d}"} for n in range(size // len(pack_data(line)))]
    while found and len(pack_data(order(99_999_999, 0) | {"items": found})) > size:
        found.pop()
    return found


def order(i: int, size: int) -> dict[str, Any]:
    """An order; with line items, about `size` bytes of msgpack."""
    data: dict[str, Any] = {"id": i, "status": "paid", "total": 1234 + i % 1000}
    return data | {"items": items(size)} if size else data


def event(i: int, data: int | None) -> dict[str, Any]:
    """An order-like event; urls are all different, as distinct objects are."""
    url = f"https://shop.example.com/orders/{i:08d}"
    return {"type": "update", "url": url} | ({} if data is None else {"data": order(i, data)})


def used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def events_for(case: Case, count: int, quick: bool) -> int:
    """`count` for the small cases; for a payload, about CASE_BYTES of it (an eighth quick)."""
    if not case.data:
        return count
    return max(200, min(count, (CASE_BYTES >> (3 if quick else 0)) // case.data))


def measure(the_bus: Bus, client: redis.Redis, case: str, count: int) -> dict[str, float]:
    """Bytes per event in valkey, and of the same events as msgpack and as JSON."""
    data, max_events, coalesce = CASES[case]
    topic = common.topic_name(f"m{list(CASES).index(case)}")
    sub = the_bus.client("sub")
    sub.call("DELETE", "/subscriber")  # what the previous case queued leaves first
    route = {"topic": topic, "coalesce": coalesce}
    body = {"topics": [route], "callback": "http://127.0.0.1:9/in", "max": max_events}
    sub.ok("POST", "/subscription", body)
    events = [event(i, data) for i in range(count)]
    now = int(time.time() * 1000)
    packed = sum(len(pack_event(topic, e["type"], e["url"], now, e.get("data"))) for e in events)
    as_json = sum(len(json.dumps(e, separators=(",", ":"))) for e in events)
    bulk = max(1, min(BULK, BODY * count // max(1, as_json)))
    before = used(client)
    with contextlib.closing(the_bus.api("pub")) as pub:
        for i in range(0, count, bulk):
            pub.ok("POST", f"/topics/{topic}", events[i : i + bulk])
    after = used(client)
    home = the_bus.keys.home("sub")
    queued = int(client.hget(home.event_gauge, "sub") or 0)
    batches = int(client.hget(home.batch_gauge, "sub") or 0)
    sub.call("DELETE", "/subscriber")
    sub.close()
    if queued != count:
        raise RuntimeError(f"{case}: {queued} of {count} events queued")
    return {
        "redis": (after - before) / count, "msgpack": packed / count,
        "json": as_json / count, "per_batch": count / max(1, batches), "events": count,
    }  # fmt: skip


def report(command: str, runs: dict[str, list[dict]], rounds: int) -> str:
    lines = [
        "# Redis memory per queued event",
        "",
        f"`{command}` from the repository root; {common.machine()}.",
        "",
        "Events published through `busbar web` in POSTs of up to "
        f"{BULK} events and {BODY:,} bytes (under the 1 MiB body limit) to a topic with one "
        "subscriber and no worker, so all stay queued; valkey (pip wheel) INFO "
        "`used_memory` before and after, divided by the events. msgpack: "
        "`app.codec.pack_event` of the same events (topic, type, url, timestamp, data), "
        "the bytes a queued entry holds after its `<expires_at>|` prefix. JSON: the event "
        "as published. Urls are all distinct (`https://shop.example.com/orders/NNNNNNNN`). "
        "Data: none; three small fields (`id`, `status`, `total`); or those and line items "
        "(`sku`, `name`, `qty`, `price`) up to about 1 KiB, 10 KiB or 256 KiB of msgpack "
        "(BUSBAR_MAX_EVENT_DATA's default). Events per case: as many as the table says "
        f"(about {CASE_BYTES >> 20} MiB of msgpack for a payload). Batch: events per "
        "queued batch, the mean (a batch closes at `max` events or at about 1 MiB, "
        "BATCH_BYTES; a case's last batch is partial). Median "
        f"(min-max) of {rounds} round(s); the ratio is taken per round.",
        "",
        "| case | events | valkey bytes/event | msgpack bytes/event | valkey / msgpack "
        "| overhead bytes/event | JSON bytes/event | events/batch |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case, got in runs.items():
        redis_b, packed = [r["redis"] for r in got], [r["msgpack"] for r in got]
        ratio = [a / b for a, b in zip(redis_b, packed, strict=True)]
        overhead = [a - b for a, b in zip(redis_b, packed, strict=True)]
        lines.append(
            f"| {case} | {got[0]['events']:,} | {common.spread(redis_b, '{:,.1f}')} "
            f"| {common.spread(packed, '{:,.1f}')} | {common.spread(ratio, '{:.2f}')} "
            f"| {common.spread(overhead, '{:,.1f}')} "
            f"| {common.spread([r['json'] for r in got], '{:,.1f}')} "
            f"| {common.spread([r['per_batch'] for r in got], '{:,.1f}')} |"
        )
    lines += ["", "A 40 MiB budget (the default BUSBAR_REDIS_MAX_MEM, 50 MiB, less "
              "BUSBAR_REDIS_MIN_FREE, 10 MiB) holds before Autodrop starts shedding, at "
              "these rates:", ""]  # fmt: skip
    for case in (DEFAULT, *(c for c, spec in CASES.items() if spec.data)):
        per_event = min(r["redis"] for r in runs[case])
        lines.append(f"- {case}: about {40 * 2**20 / per_event:,.0f} queued events")
    lines.append("")
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
            for case, spec in CASES.items():
                got = measure(the_bus, client, case, events_for(spec, count, quick))
                runs[case].append(got)
                print(f"round {r} {case}: {got}", flush=True)
    command = COMMAND + (" --quick" if quick else "")
    common.write_report("memory", report(command, runs, rounds))
    default, tens = runs[DEFAULT], runs["data 10 KiB, max 100"]
    common.write_headlines("memory", [
        ("valkey bytes per queued event (data, max 100)",
         common.spread([r["redis"] for r in default], "{:.0f}")),
        ("valkey / raw msgpack",
         common.spread([r["redis"] / r["msgpack"] for r in default], "{:.2f}")),
        ("valkey / raw msgpack, 10 KiB of data",
         common.spread([r["redis"] / r["msgpack"] for r in tens], "{:.2f}")),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
