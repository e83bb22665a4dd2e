"""A delivery's lease counts from when the script that began it was sent, not from when
its reply came: a worker paused in between (SIGSTOP, a stalled VM, its reply waiting in
a socket) may find, when it wakes, that another worker took its job over and is
delivering the batch. It must not send its copy then, or the subscriber gets two
requests at once (found by `make soak`: a SIGSTOP landing between a begin and its reply).

The production engine (app/delivery/engine.py, in a thread as `busbar worker` runs it)
talks to a real server through a TCP proxy that holds the reply that began the delivery
(the one that carries its event) for longer than half the scrub window, as such a pause
does."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import pytest
import redis

from app.lua import Scripts
from app.models.callback_policy import LOOPBACK_OPEN
from app.models.event import Event
from app.models.keys import Keys
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore
from app.services.ingest import Ingest
from config.settings import Settings
from spec.app.delivery.test_slots import engine_in_thread
from spec.app.test_redis_client import proxied
from spec.integration.processes import wait_until
from spec.integration.subscriber import serving

SCRUB_AFTER_MS = 2000  # the lease: half of it, 1 s


@pytest.mark.parametrize(("held_s", "late"), [(1.6, 1), (0.2, 0)])
def test_a_begin_whose_reply_came_after_the_lease_is_not_sent(
    redis_url: str, redis_client: redis.Redis, settings: Settings, keys: Keys, scripts: Scripts,
    held_s: float, late: int, caplog: pytest.LogCaptureFixture,
):  # fmt: skip
    TokenStore(redis_client, keys).create("pub", "pub")
    url = b"https://o.test/held"  # in the reply that begins its delivery, and no other
    with serving() as sub, proxied(redis_url, hold_s=held_s, in_reply=url) as proxy:
        body = {"topics": ["orders"], "callback": sub.url, "max": 1}
        SubscriberStore(redis_client, keys, scripts).subscribe(
            "sub", parse_subscription(body, allow_http=True, policy=LOOPBACK_OPEN), 0
        )
        through = replace(
            settings, redis_url=f"redis://127.0.0.1:{proxy.port}/0", delivery_concurrency=1,
            callback_allow=LOOPBACK_OPEN.allow, scrub_after_ms=SCRUB_AFTER_MS, timeout=1,
        )  # fmt: skip
        with caplog.at_level(logging.INFO):
            _, stop, thread = engine_in_thread(through)
            try:
                Ingest(redis_client, keys, scripts, settings).publish(
                    "orders", "pub", [Event("create", url.decode(), 1, None)]
                )
                wait_until(lambda: proxy.in_reply is None, 10, "the begin")
                wait_until(lambda: len(sub.received) == 1, 10, "the delivery")
                time.sleep(0.5)  # and no second request
            finally:
                stop.set()
                thread.join(10)
    # a late begin's copy is not sent: the slot gives its job back and begins it afresh,
    # with a lease of its own; so the subscriber gets the batch once either way
    abandoned = [r for r in caplog.records if "began too long ago" in r.getMessage()]
    assert (len(abandoned), len(sub.received)) == (late, 1)
