"""`busbar worker` as a real process: it heartbeats, and SIGTERM stops it cleanly."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import redis
from redis.cluster import RedisCluster

from app.redis_client import server_time_ms
from spec.conftest import ROOT_KEY
from spec.integration.bus import bus, events, fast_scrub
from spec.integration.layouts import Layout
from spec.integration.processes import busbar_env, running, wait_until
from spec.integration.subscriber import Received, Subscriber, serving


def test_worker_heartbeats_and_stops_cleanly_on_sigterm(
    layout: Layout, redis_client: redis.Redis, tmp_path: Path
):
    """It beats into the catalog and every shard (scrub judges each beside its lists)."""
    env = busbar_env(BUSBAR_REDIS_URL=layout.url, BUSBAR_ROOT_KEY=ROOT_KEY, **fast_scrub(5000))
    places = [layout.keys.catalog, *layout.keys.all_shards()]
    with running(["worker"], env, log=tmp_path / "worker.log") as worker:
        wait_until(
            lambda: all(redis_client.hlen(p.workers) == 1 for p in places), what="a heartbeat"
        )
        workers = places[0].workers
        ((worker_id, first),) = redis_client.hgetall(workers).items()
        assert str(worker.pid).encode() in worker_id
        wait_until(
            lambda: int(redis_client.hget(workers, worker_id) or 0) > int(first),
            what="a second heartbeat",
        )
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
    assert all(redis_client.hlen(p.workers) == 0 for p in places)
    assert "stopped" in (tmp_path / "worker.log").read_text()


def test_worker_keeps_running_while_redis_is_unreachable(tmp_path: Path):
    env = busbar_env(
        BUSBAR_REDIS_URL="redis://127.0.0.1:1/0", BUSBAR_ROOT_KEY=ROOT_KEY, **fast_scrub(5000)
    )
    log = tmp_path / "worker.log"
    with running(["worker"], env, log=log) as worker:
        wait_until(lambda: "heartbeat failed" in log.read_text(), what="a logged failure")
        assert worker.poll() is None
        worker.send_signal(signal.SIGINT)
        assert worker.wait(30) == 0


def test_worker_refuses_a_scrub_window_shorter_than_a_delivery(redis_url: str, tmp_path: Path):
    """A worker cut off from Redis would be replaced while its request still runs."""
    env = busbar_env(
        BUSBAR_REDIS_URL=redis_url, BUSBAR_ROOT_KEY=ROOT_KEY, BUSBAR_SCRUB_AFTER_MS="10000"
    )
    log = tmp_path / "worker.log"
    with running(["worker"], env, log=log) as worker:
        assert worker.wait(30) == 2
    (line,) = log.read_text().splitlines()
    assert "BUSBAR_SCRUB_AFTER_MS (10000 ms)" in line and "BUSBAR_TIMEOUT" in line


def test_heartbeat_goes_on_until_the_last_delivery_has_settled(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
):
    """SIGTERM during a slow delivery: the worker finishes it, and meanwhile keeps telling
    the others it is alive, or they would scrub the job and deliver the batch again."""
    arrived = threading.Event()

    def slow(_request: Received) -> tuple[int, float]:
        arrived.set()
        return 200, 3.0

    with (
        serving(Subscriber(responder=slow)) as sub,
        bus(redis_url, tmp_path, **fast_scrub(7500, timeout_s=5)) as b,
    ):
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=1, timeout=0)
        b.publish("pub", "orders", events(1))
        assert arrived.wait(20)
        (worker,) = b.workers
        workers = b.keys.catalog.workers
        ((process, _),) = redis_client.hgetall(workers).items()
        worker.send_signal(signal.SIGTERM)
        stopped_at = server_time_ms(redis_client, workers)
        beats = set()
        while worker.poll() is None:
            beats.add(int(redis_client.hget(workers, process) or 0))
            time.sleep(0.1)
        assert worker.returncode == 0
        assert len(sub.received) == 1 and sub.received[0].status == 200
        assert b.subscription("sub")["events"]["queued"] == 0
    assert len([beat for beat in beats if beat > stopped_at + 1000]) >= 2
    assert redis_client.hget(workers, process) is None  # gone once it had settled


def test_a_worker_with_other_shards_than_the_bus_refuses_to_start(
    layout: Layout, redis_client: redis.Redis, tmp_path: Path
):
    shards = layout.keys.shards
    redis_client.hset(layout.keys.meta, "shards", shards)  # the bus as first used
    env = busbar_env(BUSBAR_REDIS_URL=layout.url, BUSBAR_ROOT_KEY=ROOT_KEY, **fast_scrub(5000))
    env["BUSBAR_SHARDS"] = str(shards + 1)
    log = tmp_path / "worker.log"
    with running(["worker"], env, log=log) as worker:
        assert worker.wait(30) == 2
    assert f"set BUSBAR_SHARDS={shards}" in log.read_text()


def test_an_idle_worker_waits_without_spinning(
    layout: Layout, redis_client: redis.Redis, tmp_path: Path
):
    """Of its 64 delivery threads (the default), one per shard blocks on it in Redis (one
    take a second each, BUSBAR_ACQUIRE_TIMEOUT) and the others wait in the process: a
    few takes a second per shard, not per thread."""
    env = busbar_env(BUSBAR_REDIS_URL=layout.url, BUSBAR_ROOT_KEY=ROOT_KEY, **fast_scrub(5000))
    with running(["worker"], env, log=tmp_path / "worker.log"):
        wait_until(lambda: redis_client.hlen(layout.keys.catalog.workers) == 1, what="a beat")
        time.sleep(2)
        before, scripts_before = takes(redis_client), scripts(redis_client)
        started = time.monotonic()
        time.sleep(3)
        took = time.monotonic() - started
        per_second = (takes(redis_client) - before) / took
        scripts_per_second = (scripts(redis_client) - scripts_before) / took
    watchers = layout.keys.shards
    assert per_second < 3 * watchers, f"{per_second:.0f} takes a second, {watchers} shards"
    # the scheduler sleeps until a job is due or its bell rings (workers/scheduler.py):
    # it polled every 10 ms before, 100 scripts a second (700 on the cluster's 6 shards
    # and the catalog), 120 and 720 in all; now the heartbeats, the tickers and at most
    # 4 promotions a second per scheduler, 26 and 75 in all here
    most = 60 if layout.name == "single" else 200
    assert scripts_per_second < most, f"{scripts_per_second:.0f} scripts a second"


def takes(client: redis.Redis) -> int:
    """BLMOVE calls so far (the blocking takes), over every node."""
    return _calls(client, "blmove")


def scripts(client: redis.Redis) -> int:
    """Script calls so far, over every node."""
    return _calls(client, "evalsha") + _calls(client, "eval")


def _calls(client: redis.Redis, command: str) -> int:
    if isinstance(client, RedisCluster):
        stats = client.info("commandstats", target_nodes=RedisCluster.PRIMARIES).values()
    else:
        stats = [client.info("commandstats")]
    return sum(int(s.get(f"cmdstat_{command}", {}).get("calls", 0)) for s in stats)


def test_an_idle_worker_stops_at_once_whatever_its_takes_block_for(
    layout: Layout, redis_client: redis.Redis, tmp_path: Path
):
    """SIGTERM to an idle worker whose slots and aux thread block 30 s at a time
    (BUSBAR_ACQUIRE_TIMEOUT): it ends its blocked takes (app/unblock.py) and exits in
    well under a second, where it waited out the takes before (up to 30 s here, a
    second by default, on every deploy). Nothing is left in a pending list or index."""
    env = busbar_env(
        BUSBAR_REDIS_URL=layout.url, BUSBAR_ROOT_KEY=ROOT_KEY, BUSBAR_ACQUIRE_TIMEOUT="30",
        **fast_scrub(60_000),
    )  # fmt: skip
    with running(["worker"], env, log=tmp_path / "worker.log") as worker:
        marker = f".{worker.pid}.".encode()
        indexes = [p.jobs_pending_index("main") for p in layout.keys.all_shards()]

        def watching() -> bool:  # a slot of it named in every shard's index, then blocked
            return all(any(marker in w for w in redis_client.smembers(i)) for i in indexes)

        wait_until(watching, what="the worker's slots to block on every shard")
        time.sleep(0.5)  # every take well into its 30 s
        stopped = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
        took = time.monotonic() - stopped
    assert took < 5, f"stopped in {took:.1f} s"
    for place in layout.keys.all_shards():
        assert redis_client.scard(place.jobs_pending_index("main")) == 0
