"""A worker thread against a real server and a real subscriber, when Redis misbehaves."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import redis

from app.lua import Scripts
from app.models.event import Event
from app.models.keys import Keys, keys_for
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore
from app.services.ingest import Ingest
from config.settings import Settings
from spec.app.test_redis_client import proxied
from spec.integration.processes import wait_until
from spec.integration.subscriber import Subscriber, serving
from workers.doorbell import Doorbell
from workers.runner import JobRunner


def test_a_lost_blmove_reply_is_recovered_and_the_batch_delivered_once(
    redis_url: str, redis_client: redis.Redis, settings: Settings, keys: Keys, scripts: Scripts
):
    """The job moved into the thread's pending list, but the thread never heard of it:
    it gives its own list back and takes the job again, instead of leaving it stuck."""
    TokenStore(redis_client, keys).create("pub", "pub")
    with serving() as sub, proxied(redis_url, trigger=b"$6\r\nBLMOVE\r\n") as proxy:
        body = {"topics": ["orders"], "callback": sub.url, "max": 1}
        SubscriberStore(redis_client, keys, scripts).subscribe(
            "sub", parse_subscription(body, allow_http=True), 0
        )
        Ingest(redis_client, keys, scripts, settings).publish(
            "orders", "pub", [Event("create", "https://o.test/1", 1, None)]
        )
        through = replace(settings, redis_url=f"redis://127.0.0.1:{proxy.port}/0")
        runner = JobRunner(replace(through, allow_link_local_callbacks=True), "main", "w.1.x/0")
        stop = threading.Event()
        thread = threading.Thread(target=runner.run, args=(stop,), daemon=True)
        thread.start()
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


def test_a_thread_takes_from_every_shard_in_turn_and_waits_on_its_home(
    settings: Settings, keys: Keys, scripts: Scripts, redis_client: redis.Redis
):
    """Fair between shards: each sweep starts one shard further; with nothing anywhere
    it blocks on its home shard, and a job pushed there wakes it at once."""
    runner = JobRunner(settings, "main", "w.1.x/0", doorbell=Doorbell(4, first=2))
    queues = runner.queues
    for shard, queue in enumerate(queues):
        for n in range(2):
            queue.push(f"job-{shard}-{n}".encode(), 0)
    taken = []
    for _ in range(2 * len(queues)):
        queue, job, _ = runner._take()
        taken.append(job.decode())
        assert queue.settle("w.1.x/0", job, 0)
    assert taken[: len(queues)] == ["job-2-0", "job-3-0", "job-0-0", "job-1-0"]
    assert sorted(taken) == sorted(f"job-{s}-{n}" for s in range(4) for n in range(2))
    pusher = threading.Timer(0.3, lambda: queues[2].push(b"late", 0))
    pusher.start()
    started = time.monotonic()
    queue, job, _ = runner._take()  # blocks on shard 2 (1 s at most)
    assert (job, queue.shard) == (b"late", 2) and time.monotonic() - started < 0.9
    pusher.join()  # its reply read before the client closes
    runner.ctx.redis.close()


def test_a_job_is_taken_at_once_while_the_thread_that_watched_its_shard_is_busy(
    redis_client: redis.Redis, settings: Settings, keys: Keys, scripts: Scripts
):
    """Two threads of one process: the one watching in Redis takes a slow subscriber's
    job; the other takes over the watch, so a job for another subscriber on the same
    shard starts at once, not after the slow answer or a poll."""
    lone = replace(settings, shards=1, allow_link_local_callbacks=True)
    one_shard = keys_for(lone)
    TokenStore(redis_client, one_shard).create("pub", "pub")
    store = SubscriberStore(redis_client, one_shard, scripts)
    ingest = Ingest(redis_client, one_shard, scripts, lone)
    with serving(Subscriber(responder=lambda r: (200, 2.0))) as slow, serving() as fast:
        for name, sub in (("slow", slow), ("fast", fast)):
            body = {"topics": [name], "callback": sub.url, "max": 1, "timeout": 0}
            store.subscribe(name, parse_subscription(body, allow_http=True), 0)
        bell, stop = Doorbell(1), threading.Event()
        threads = [
            threading.Thread(
                target=JobRunner(lone, "main", f"w.1.x/{i}", doorbell=bell).run,
                args=(stop,),
                daemon=True,
            )
            for i in range(2)
        ]
        for thread in threads:
            thread.start()
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
            for thread in threads:
                thread.join(10)
