"""Benchmark: delivery log -> Parquet lake with local Spark, and what starting Spark costs.

    python -m bench.lake_run [--events 200000] [--per-batch 10] [--master local[2]]
        [--redis-url URL]    # default: a throwaway server (dev.redis_server)

One run of it is one process, so that every run pays a cold JVM; bench/lake.py runs it
several times and turns its printed figures into medians.

Writes the log into EMPTY streams under its own key prefix (`busbarbench:`), then times:
session start (JVM + context), decoding alone (no Spark, one core), the first ingest
(includes starting Python workers) and a second ingest of as many new events (warm).
Then `busbar spark replay`'s job replays the whole lake (both ingests' events) to one
subscriber, Spark already started: lake -> selection -> queue, in steps, exactly once.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from app import codec
from app.models.keys import Keys
from dev import redis_server
from spark import offsets, rows

PREFIX = "busbarbench:"
PARTITIONS = 4


def fill(client: redis.Redis, events: int, per_batch: int, first_batch: int = 0) -> int:
    """XADD log entries shaped like deliver_ack.lua's; returns the number of entries."""
    keys = Keys(PREFIX, PARTITIONS)
    now = int(time.time() * 1000)
    batches = events // per_batch
    pipe = client.pipeline(transaction=False)
    for b in range(first_batch, first_batch + batches):
        packed = [
            b"0|"
            + codec.pack_event(
                "orders",
                "create",
                f"https://shop.example/orders/{b}-{i}",
                now,
                {"total": i, "currency": "EUR"},
            )
            for i in range(per_batch)
        ]
        pipe.xadd(
            keys.shard(b % PARTITIONS).delivery_log,
            {
                "subscriber": f"sub{b % 7}",
                "priority": b % 11,
                "batch_id": b,
                "created_at": now - 900,
                "first_attempt_at": now - 400,
                "delivered_at": now,
                "attempts": 1,
                "events": codec.pack_log_events(packed),
            },
        )
        if len(pipe) >= 1000:
            pipe.execute()
    pipe.execute()
    return batches


def decode_rate(client: redis.Redis) -> float:
    """Events/s of XRANGE + decode + Arrow for one partition on one core: the ceiling."""
    started, count, cursor = time.monotonic(), 0, "0-0"
    key = Keys(PREFIX, PARTITIONS).shard(0).delivery_log
    while chunk := offsets.xrange_after(client, key, cursor, "+", 1000):
        count += rows.to_record_batch(0, chunk).num_rows
        cursor = chunk[-1][0].decode()
    return count / (time.monotonic() - started)


def replay_all(client: redis.Redis, url: str, lake: Path) -> tuple[int, float]:
    """`busbar spark replay --lake LAKE --to bench` in this process (its session is the
    one running), with a window no replay reaches: (events queued, seconds)."""
    from app.lua import Scripts
    from app.models.callback_policy import Policy
    from app.models.subscribers import SubscriberStore
    from app.models.subscription import parse_subscription
    from app.models.tokens import TokenStore
    from config.settings import Settings
    from spark.cli import StopRequest, parser
    from spark.replay import run_replay

    settings = Settings(redis_url=url, key_prefix=PREFIX, shards=PARTITIONS)
    keys = Keys(PREFIX, PARTITIONS)
    TokenStore(client, keys).create("bench", "bench-token")
    body = {"topics": ["orders"], "callback": "https://subscriber.example/hook"}
    subscription = parse_subscription(body, allow_http=False, policy=Policy.of(settings))
    SubscriberStore(client, keys, Scripts(client)).subscribe("bench-token", subscription, 0)
    args = parser().parse_args(
        ["replay", "--lake", str(lake), "--to", "bench", "--window", str(10**9)]
    )
    before = int(client.hget(keys.home("bench-token").event_gauge, "bench-token") or 0)
    started = time.monotonic()
    assert run_replay(args, settings, StopRequest()) == 0
    took = time.monotonic() - started
    after = int(client.hget(keys.home("bench-token").event_gauge, "bench-token") or 0)
    return after - before, took


@contextmanager
def redis_for(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    server = redis_server.start(Path(tempfile.mkdtemp(prefix="busbar-bench-")), persistent=False)
    try:
        yield server.url
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lake_run")
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--per-batch", type=int, default=10)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--redis-url")
    args = parser.parse_args(argv)
    with redis_for(args.redis_url) as url, tempfile.TemporaryDirectory() as work:
        client = redis.Redis.from_url(url)
        client.delete(*[Keys(PREFIX, PARTITIONS).shard(p).delivery_log for p in range(PARTITIONS)])
        started = time.monotonic()
        entries = fill(client, args.events, args.per_batch)
        print(
            f"log: {entries} entries / {args.events} events written in "
            f"{time.monotonic() - started:.1f} s"
        )
        print(f"decode only (1 core, no Spark): {decode_rate(client):,.0f} events/s")

        from spark.ingest import ingest
        from spark.session import get_session

        started = time.monotonic()
        spark = get_session(args.master, "busbar-bench", {"spark.ui.showConsoleProgress": "false"})
        print(f"session start ({args.master}): {time.monotonic() - started:.1f} s")
        for label in ("first ingest (cold workers)", "second ingest (warm)"):
            result = ingest(  # the events table alone: its rate, as measured before attempts
                Path(work) / "lake", Path(work) / "ckpt", url, PREFIX, PARTITIONS, spark=spark,
                tables=["events"],
            )  # fmt: skip
            print(
                f"{label}: {result.rows} events in {result.seconds:.1f} s = "
                f"{result.rows / result.seconds:,.0f} events/s"
            )
            fill(client, args.events, args.per_batch, first_batch=entries)
        from spark.lake import events as lake_events

        total = lake_events(spark, Path(work) / "lake").count()
        print(f"lake rows: {total}")
        queued, seconds = replay_all(client, url, Path(work) / "lake")
        print(f"replay (lake -> queue): {queued} events in {seconds:.1f} s = "
              f"{queued / seconds:,.0f} events/s")  # fmt: skip
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
