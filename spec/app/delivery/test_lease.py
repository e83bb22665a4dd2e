"""A delivery's lease counts from when the script that began it was sent, not from when
its reply came: a worker paused in between (SIGSTOP, a stalled VM, its reply waiting in
a socket) may find, when it wakes, that another worker took its job over and is
delivering the batch. It must not send its copy then, or the subscriber gets two
requests at once (found by `make soak`: a SIGSTOP landing between a begin and its reply).

Between the delivery and a real server, a TCP proxy holds the begin's reply for longer
than half the scrub window, as such a pause does."""

from __future__ import annotations

import pytest
import redis

from app.delivery.sync import Delivery
from app.errors import JobLost
from app.lua import Scripts
from app.models.keys import Keys
from spec.app.services.delivery_bench import JOB, WORKER, Bench
from spec.app.test_redis_client import proxied
from spec.integration.subscriber import serving

SCRUB_AFTER_MS = 2000  # the lease: half of it, 1 s


@pytest.mark.parametrize(("held_s", "sent"), [(1.5, 0), (0.2, 1)])
def test_a_begin_whose_reply_came_after_the_lease_is_not_sent(
    redis_url: str, redis_client: redis.Redis, keys: Keys, scripts: Scripts, held_s: float,
    sent: int,
):  # fmt: skip
    bench = Bench(redis_client, keys, scripts, scrub_after_ms=SCRUB_AFTER_MS, timeout=1)
    with serving() as sub, proxied(redis_url, hold_s=held_s) as proxy:
        late = redis.Redis.from_url(f"redis://127.0.0.1:{proxy.port}/0")
        bench.delivery = Delivery(keys, Scripts(late), bench.settings, bench.http)
        bench.subscribe(sub.url, ["orders"], max=1)
        bench.publish(1)
        bench.take()
        late.ping()  # connected: the next reply through the proxy is the begin's
        proxy.drop.set()
        if sent:
            assert bench.delivery.run("sub", WORKER, JOB).kind == "delivered"
        else:
            with pytest.raises(JobLost, match="began too long ago"):
                bench.delivery.run("sub", WORKER, JOB)
        late.close()
    assert len(sub.received) == sent
