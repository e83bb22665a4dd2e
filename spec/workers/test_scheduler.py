"""The scrub ticker against a real server that goes down and comes back: a live worker
whose heartbeats could not land while Redis was away is not taken for dead before it
has had a whole scrub window to beat again (the soak's batch sent twice at once)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import redis

from app.clock import now_ms
from app.lua import Scripts, prelude
from app.models import job_calls
from app.models.keys import Keys, keys_for
from app.models.queue import JobQueue
from app.unblock import blocking_name, unblock
from config.settings import Settings
from spec.conftest import ROOT_KEY
from spec.integration.faults import own_redis
from workers.scheduler import ScrubTicker, schedulers

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


def test_a_job_scheduled_while_the_scheduler_sleeps_is_promoted_when_due(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """The scheduler sleeps until the earliest job it knows of (here none, so its most:
    5 s in this test); a job scheduled meanwhile, 300 ms ahead, rings its bell, and it
    is promoted when due, not at the end of that sleep. Polling every 10 ms, as before
    the bell, cost 100 scripts a second per idle worker (600 on a 6-shard cluster)."""
    settings = Settings(redis_url=redis_url, root_key=ROOT_KEY)
    keys = keys_for(settings)
    (scheduler,) = schedulers(settings, "w.1.a", wake_at_most_s=5.0)
    stop = threading.Event()
    thread = threading.Thread(target=scheduler.run, args=(stop,), daemon=True)
    thread.start()
    try:
        time.sleep(0.3)  # asleep: nothing is scheduled
        home = keys.all_shards()[1]
        queue = JobQueue(redis_client, keys, Scripts(redis_client), "main", 1)
        due = now_ms() + 300
        assert queue.push(b"batch-job", now_ms(), at=due)
        while not redis_client.llen(home.jobs_instant("main")) and now_ms() < due + 3000:
            time.sleep(0.002)
        promoted = now_ms()
        assert due <= promoted < due + 150, f"promoted {promoted - due} ms after due"
    finally:
        stop.set()
        unblock(redis_client, blocking_name("w.1.a"))
        thread.join(5)
    assert not thread.is_alive()


def test_the_bell_rings_once_for_a_job_that_becomes_the_earliest(
    redis_client: redis.Redis, keys: Keys
) -> None:
    """app/lua/lib/jobs.lua's job_ring: a job due before every other rings the bell
    (one item, however often rung); one due later does not; a job moved earlier than the
    rest (deliver_fail's and deliver_ack's job_due_by) rings it."""
    home = keys.all_shards()[0]
    queue = JobQueue(redis_client, keys, Scripts(redis_client), "main", 0)
    bell = home.jobs_schedule_bell("main")
    now = now_ms()
    queue.push(b"a", now, at=now + 10_000)
    queue.push(b"b", now, at=now + 5_000)
    assert redis_client.lrange(bell, 0, -1) == [b"1"]  # rung twice, one item
    redis_client.delete(bell)
    queue.push(b"c", now, at=now + 20_000)
    assert redis_client.llen(bell) == 0  # not the earliest
    queue.push(b"a", now, at=now + 1_000)  # already scheduled: pushed again, left alone
    assert redis_client.llen(bell) == 0
    redis_client.eval(
        _due_by(), 3, *home.job_states("main"), b"c", now + 1_000, now
    )  # moved before "b"
    assert redis_client.llen(bell) == 1


def _due_by() -> str:
    """job_due_by alone, with what it calls, as the scripts that move a job earlier have
    it (app/lua/prelude.py)."""
    source = (Path(prelude.__file__).parent / "lib" / "jobs.lua").read_text()
    call = "job_due_by(KEYS[1], KEYS[2], KEYS[3], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]))"
    return prelude.prelude([prelude.definitions("jobs", source)], call) + call
