"""A worker thread against a real server and a real subscriber, when Redis misbehaves."""

from __future__ import annotations

import threading
from dataclasses import replace

import redis

from app.lua import Scripts
from app.models.event import Event
from app.models.keys import Keys
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore
from app.services.ingest import Ingest
from config.settings import Settings
from spec.app.test_redis_client import proxied
from spec.integration.processes import wait_until
from spec.integration.subscriber import serving
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
