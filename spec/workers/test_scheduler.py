"""The scrub ticker against a real server that goes down and comes back: a live worker
whose heartbeats could not land while Redis was away is not taken for dead before it
has had a whole scrub window to beat again (the soak's batch sent twice at once)."""

from __future__ import annotations

import time
from pathlib import Path

import redis

from app.lua import Scripts
from app.models import job_calls
from app.models.keys import keys_for
from config.settings import Settings
from spec.conftest import ROOT_KEY
from spec.integration.faults import own_redis
from workers.scheduler import ScrubTicker

WINDOW_S = 1.0
LIVE = "live.1.aa"


class Hands:
    """The monotonic clock the ticker reads, moved by the test."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_worker_gets_a_whole_window_after_redis_returns(tmp_path: Path) -> None:
    with own_redis(tmp_path / "redis", True, appendfsync="always") as own:
        settings = Settings(
            redis_url=own.url, root_key=ROOT_KEY, scrub_after_ms=int(WINDOW_S * 1000)
        )
        keys = keys_for(settings)
        client = redis.Redis.from_url(own.url)
        home = keys.all_shards()[0]
        pending = home.jobs_pending("main", f"{LIVE}/0")
        client.lpush(pending, b"job-in-hand")
        client.sadd(home.jobs_pending_index("main"), f"{LIVE}/0")
        client.sadd(home.jobs_index("main"), b"job-in-hand")

        def beat() -> None:
            scripts = Scripts(client)
            for place in [keys.catalog, *keys.all_shards()]:
                scripts.run(job_calls.heartbeat(place, LIVE))

        hands = Hands()
        ticker = ScrubTicker(settings, WINDOW_S / 3, clock=hands)
        beat()
        hands.now = 0.5
        assert ticker.step() is False  # just started: it has watched nothing yet
        hands.now = 1.1
        assert ticker.step() is True  # a window in reach: it judges, and LIVE is alive
        assert client.llen(pending) == 1

        own.crash()
        hands.now = 1.5
        assert ticker.step() is False  # Redis away: nothing judged
        time.sleep(WINDOW_S + 0.3)  # LIVE's last beat is older than a window now
        own.start()
        client = redis.Redis.from_url(own.url)
        hands.now = 2.6  # a window after the first error, Redis back a moment ago
        assert ticker.step() is False
        hands.now = 3.4  # Redis back for 0.8 s: LIVE has not beaten yet, and is not judged
        assert ticker.step() is False
        assert client.llen(pending) == 1
        hands.now = 3.7  # a whole window in reach and still silent: now it is dead
        assert ticker.step() is True
        assert client.llen(pending) == 0
        assert client.lrange(home.jobs_instant("main"), 0, -1) == [b"job-in-hand"]
