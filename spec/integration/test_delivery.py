"""End to end: `busbar web` + `busbar worker` processes deliver to a real HTTP subscriber."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import redis
from redis.cluster import RedisCluster

from spec.integration.bus import bus, events, fast_scrub
from spec.integration.processes import wait_until
from spec.integration.subscriber import Subscriber, serving
from spec.view import counter


def test_delivery_format_auth_and_batching(redis_url: str, redis_client, tmp_path: Path):
    with serving() as sub, bus(redis_url, tmp_path, BUSBAR_MONITOR_INTERVAL="1") as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=10, timeout=300, uuid="sub-uuid")
        started = time.monotonic()
        b.publish("pub", "orders", events(25))
        got = sub.wait_for(25)
        assert [len(r.events) for r in sub.received] == [10, 10, 5]
        # the two full batches go at once; the partial one waits for its timeout
        assert sub.received[2].at * 1000 >= got[20]["t"] + 290
        assert time.monotonic() - started < 5
        assert {(r.user, r.content_type, r.path) for r in sub.received} == {
            ("sub-uuid", "application/json", "/events")
        }
        assert got[0] == {"topic": "orders", "type": "create", "url": "https://o.test/0",
                          "t": got[0]["t"], "data": {"i": 0}}  # fmt: skip
        assert [e["url"] for e in got] == [f"https://o.test/{i}" for i in range(25)]
        wait_until(lambda: b.subscription("sub")["events"]["sent"] == 25, what="sent count")
        assert b.subscription("sub")["events"]["queued"] == 0
        log = tmp_path / "worker0.log"
        wait_until(lambda: "delivery.events=25" in log.read_text(), 10, "Monitor to print")
        assert "events.published=25" in log.read_text()


def test_retries_until_acknowledged(redis_url: str, redis_client, tmp_path: Path):
    failures = {"left": 3}

    def flaky(_request) -> tuple[int, float]:
        if failures["left"]:
            failures["left"] -= 1
            return 500, 0.0
        return 204, 0.0

    with (
        serving(Subscriber(responder=flaky)) as sub,
        bus(redis_url, tmp_path, BUSBAR_RETRY_FIRST_MS="50") as b,
    ):
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=5, timeout=0)
        b.publish("pub", "orders", events(5))
        sub.wait_for(5)
        assert [r.status for r in sub.received] == [500, 500, 500, 204]
        assert all(len(r.events) == 5 for r in sub.received)
        wait_until(lambda: b.subscription("sub")["health_points"] == 95, what="health points")


def test_order_and_one_request_in_flight_with_many_threads(
    redis_url: str, redis_client, tmp_path: Path
):
    slow = Subscriber(responder=lambda _: (200, 0.01))
    with (
        serving(slow) as sub,
        bus(redis_url, tmp_path, workers=2, BUSBAR_DELIVERY_CONCURRENCY="4") as b,
    ):
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=7, timeout=0)
        for start in range(0, 200, 5):
            b.publish("pub", "orders", events(5, start))
        got = sub.wait_for(200)
        assert [e["url"] for e in got] == [f"https://o.test/{i}" for i in range(200)]
        assert sub.max_in_flight == 1
        assert max(len(r.events) for r in sub.received) <= 7


def _first_request_blocks(release: threading.Event, arrived: threading.Event) -> Subscriber:
    def responder(_request) -> tuple[int, float]:
        if not arrived.is_set():
            arrived.set()
            release.wait(20)
        return 200, 0.0

    return Subscriber(responder=responder)


def test_kill_9_during_delivery_then_a_new_worker_delivers_again(
    redis_url: str, redis_client, tmp_path: Path
):
    release, arrived = threading.Event(), threading.Event()
    with (
        serving(_first_request_blocks(release, arrived)) as sub,
        bus(redis_url, tmp_path, **fast_scrub(2500)) as b,
    ):
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=3, timeout=0)
        b.publish("pub", "orders", events(3))
        assert arrived.wait(20)
        (worker,) = b.workers
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        release.set()  # the dead worker's request gets its answer, but nobody acknowledges
        b.start_worker()
        wait_until(lambda: len(sub.received) == 2, 30, "the batch to be delivered again")
        assert sub.received[0].events == sub.received[1].events
        wait_until(
            lambda: b.subscription("sub")["events"]["queued"] == 0, what="the queue to empty"
        )


def test_sigterm_during_delivery_completes_it_once(redis_url: str, redis_client, tmp_path: Path):
    release, arrived = threading.Event(), threading.Event()
    with serving(_first_request_blocks(release, arrived)) as sub, bus(redis_url, tmp_path) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=3, timeout=0)
        b.publish("pub", "orders", events(3))
        assert arrived.wait(20)
        (worker,) = b.workers
        worker.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        assert worker.poll() is None  # still finishing its delivery
        release.set()
        assert worker.wait(30) == 0
        assert b.subscription("sub")["events"] == {
            "sent": 3,
            "queued": 0,
            "oldest": None,
            "filtered": 0,
            "transformed_out": 0,
        }
        b.start_worker()
        time.sleep(1)
        assert len(sub.received) == 1


def test_unsubscribe_during_delivery(redis_url: str, redis_client, tmp_path: Path):
    release, arrived = threading.Event(), threading.Event()
    with serving(_first_request_blocks(release, arrived)) as sub, bus(redis_url, tmp_path) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=3, timeout=0)
        b.publish("pub", "orders", events(9))
        assert arrived.wait(20)
        assert b.call("DELETE", "/subscriber", "sub").status_code == 204
        release.set()
        time.sleep(1)
        assert len(sub.received) == 1  # the delivery in flight finished; no new one started
        assert b.call("GET", "/subscriptions", "sub").json() == []
        # the batch in flight is dropped too: it was not acknowledged when the subscriber went
        assert counter(redis_client, b.keys, "events.removed") == 9
        # the job held for the delivery in flight leaves the index when the worker settles
        # it, after the answer: the subscriber has the request before that
        index = b.keys.home("sub").jobs_index("main")
        wait_until(lambda: redis_client.scard(index) == 0, 10, "the held job settled")


def fullest_node(client: redis.Redis) -> int:
    """Used memory of the fullest server (BUSBAR_REDIS_MAX_MEM applies to each)."""
    if isinstance(client, RedisCluster):
        found = client.info("memory", target_nodes=RedisCluster.PRIMARIES)
        return max(int(info["used_memory"]) for info in found.values())
    return int(client.info("memory")["used_memory"])


def test_autodrop_keeps_ingest_answering_under_a_small_memory_budget(
    redis_url: str, redis_client, tmp_path: Path
):
    used = fullest_node(redis_client)
    mib = 1024 * 1024
    budget = {"BUSBAR_REDIS_MAX_MEM": str(used + 2 * mib), "BUSBAR_REDIS_MIN_FREE": str(mib // 2),
              "BUSBAR_AUTODROP_INTERVAL": "1", "BUSBAR_MAX_EVENT_DATA": "1024"}  # fmt: skip
    with bus(redis_url, tmp_path, **budget) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", "http://127.0.0.1:9/down", ["orders"], max=100, timeout=60_000)
        padding = "x" * 500
        for start in range(0, 8000, 400):  # about 4 MiB of events for a 2 MiB budget
            batch = [{"type": "create", "url": f"https://o.test/{i}", "data": {"p": padding}}
                     for i in range(start, start + 400)]  # fmt: skip
            b.publish("pub", "orders", batch)
        wait_until(  # Autodrop drops a batch per step: memory is back under budget after
            lambda: (
                counter(redis_client, b.keys, "events.autodropped") > 0
                and fullest_node(redis_client) < used + 2 * mib
            ),
            30,
            "Autodrop to bring memory under the budget",
        )
        snapshot: list[int] = []

        def still() -> bool:  # Autodrop may drop again between two reads: take a still pair
            before = b.subscription("sub")["events"]["queued"]
            dropped = counter(redis_client, b.keys, "events.autodropped")
            snapshot[:] = [before, dropped]
            return b.subscription("sub")["events"]["queued"] == before

        wait_until(still, 10, "a moment without a drop between two reads")
        queued, dropped = snapshot
        assert queued + dropped == 8000  # every event is queued or counted as dropped
