"""The engine's slots against a real server and real subscribers: fair sweeps, waiting on
the doorbell, and recovery when Redis drops a reply."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace

import redis

from app.delivery.engine import Engine
from app.delivery.slots import Slot
from app.lua import Scripts
from app.models.callback_policy import LOOPBACK_OPEN
from app.models.event import Event
from app.models.keys import Keys, keys_for
from app.models.queue import JobQueue
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore
from app.services.ingest import Ingest
from config.settings import Settings
from spec.app.test_redis_client import proxied
from spec.integration.processes import wait_until
from spec.integration.subscriber import Subscriber, serving


def engine_in_thread(
    settings: Settings, worker: str = "w.1.x"
) -> tuple[Engine, threading.Event, threading.Thread]:
    engine = Engine(settings, worker)
    stop = threading.Event()
    thread = threading.Thread(target=engine.run, args=(stop,), daemon=True)
    thread.start()
    return engine, stop, thread


def test_a_lost_blmove_reply_is_recovered_and_the_batch_delivered_once(
    redis_url: str, redis_client: redis.Redis, settings: Settings, keys: Keys, scripts: Scripts
):
    """The job moved into the slot's pending list, but the slot never heard of it: it
    gives its own list back and takes the job again, instead of leaving it stuck."""
    TokenStore(redis_client, keys).create("pub", "pub")
    with serving() as sub, proxied(redis_url, trigger=b"$6\r\nBLMOVE\r\n") as proxy:
        body = {"topics": ["orders"], "callback": sub.url, "max": 1}
        SubscriberStore(redis_client, keys, scripts).subscribe(
            "sub", parse_subscription(body, allow_http=True, policy=LOOPBACK_OPEN), 0
        )
        through = replace(
            settings, redis_url=f"redis://127.0.0.1:{proxy.port}/0", delivery_concurrency=1,
            callback_allow=LOOPBACK_OPEN.allow,
        )  # fmt: skip
        _, stop, thread = engine_in_thread(through)
        time.sleep(0.3)  # the one slot is watching (BLMOVE) when the event comes
        Ingest(redis_client, keys, scripts, settings).publish(
            "orders", "pub", [Event("create", "https://o.test/1", 1, None)]
        )
        try:
            wait_until(lambda: len(sub.received) == 1, 10, "the delivery")
            wait_until(
                lambda: redis_client.scard(keys.home("sub").jobs_index("main")) == 0, 5, "the ack"
            )
        finally:
            stop.set()
            thread.join(10)
        assert proxy.trigger is None  # the reply was dropped once
        assert len(sub.received) == 1


def test_a_slot_takes_from_every_shard_in_turn_and_waits_on_its_home(
    settings: Settings, keys: Keys, scripts: Scripts, redis_client: redis.Redis
):
    """Fair between shards: each sweep starts one shard further; with nothing anywhere
    it blocks on a free watch, and a job pushed there wakes it at once."""
    queues = [JobQueue(redis_client, keys, scripts, "main", n) for n in range(keys.shards)]
    for shard, queue in enumerate(queues):
        for n in range(2):
            queue.push(f"job-{shard}-{n}".encode(), 0)

    async def scenario() -> tuple[list[str], tuple[bytes, int, float]]:
        room = Engine(settings, "w.1.x", first_home=2)._room()
        slot = Slot(room, 0)
        taken = []
        for _ in range(2 * len(queues)):
            found = await slot._take()
            assert found is not None
            queue, job = found.queue, found.job
            taken.append(job.decode())
            assert queues[queue.shard].settle(slot.worker, job, 0)
        pusher = threading.Timer(0.3, lambda: queues[2].push(b"late", 0))
        pusher.start()
        started = time.monotonic()
        found = await slot._take()  # sweeps, finds nothing, watches shard 2 (1 s at most)
        # the push's reply may still be on its way when the job is taken: wait for it, or
        # the test's client is closed under it (EBADF in the timer's thread)
        pusher.join(5)
        assert found is not None
        late = (found.job, found.queue.shard, time.monotonic() - started)
        await room.redis.aclose()
        await room.watch.aclose()
        await room.http.close()
        return taken, late

    taken, (job, shard, took) = asyncio.run(scenario())
    assert taken[: len(queues)] == ["job-2-0", "job-3-0", "job-0-0", "job-1-0"]
    assert sorted(taken) == sorted(f"job-{s}-{n}" for s in range(4) for n in range(2))
    assert (job, shard) == (b"late", 2) and took < 0.9


def test_a_job_is_taken_at_once_while_the_slot_that_watched_its_shard_is_busy(
    redis_client: redis.Redis, settings: Settings, scripts: Scripts
):
    """Two slots of one engine: the one watching in Redis takes a slow subscriber's job;
    the other takes over the watch, so a job for another subscriber on the same shard
    starts at once, not after the slow answer or a poll."""
    lone = replace(settings, shards=1, callback_allow=LOOPBACK_OPEN.allow, delivery_concurrency=2)
    one_shard = keys_for(lone)
    TokenStore(redis_client, one_shard).create("pub", "pub")
    store = SubscriberStore(redis_client, one_shard, scripts)
    ingest = Ingest(redis_client, one_shard, scripts, lone)
    with serving(Subscriber(responder=lambda _: (200, 2.0))) as slow, serving() as fast:
        for name, sub in (("slow", slow), ("fast", fast)):
            body = {"topics": [name], "callback": sub.url, "max": 1, "timeout": 0}
            parsed = parse_subscription(body, allow_http=True, policy=LOOPBACK_OPEN)
            store.subscribe(name, parsed, 0)
        _, stop, thread = engine_in_thread(lone)
        try:
            time.sleep(0.3)  # both idle: one watches the shard, one waits on the bell
            ingest.publish("slow", "pub", [Event("create", "https://o.test/1", 1, None)])
            wait_until(lambda: slow.in_flight == 1, 5, "the slow delivery")
            started = time.monotonic()
            ingest.publish("fast", "pub", [Event("create", "https://o.test/2", 1, None)])
            wait_until(lambda: len(fast.received) == 1, 5, "the fast delivery")
            assert time.monotonic() - started < 0.5
            assert slow.in_flight == 1  # still answering
        finally:
            stop.set()
            thread.join(10)


def test_a_clean_exit_leaves_no_slot_in_the_pending_indexes(
    redis_client: redis.Redis, settings: Settings, keys: Keys
):
    """Thousands of slots leave in a few calls per shard, not one each."""
    _, stop, thread = engine_in_thread(replace(settings, delivery_concurrency=3000))
    indexes = [place.jobs_pending_index("main") for place in keys.all_shards()]
    wait_until(lambda: all(redis_client.scard(i) for i in indexes), 10, "the watches")
    stop.set()
    thread.join(10)
    assert not thread.is_alive()
    assert [redis_client.scard(i) for i in indexes] == [0] * len(indexes)
