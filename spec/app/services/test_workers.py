"""GET /workers' figures from the real bookkeeping: heartbeats and pending lists."""

from __future__ import annotations

import redis

from app.lua import Scripts
from app.models.keys import Keys
from app.models.queue import AUX, MAIN, JobQueue
from app.redis_client import server_time_ms
from app.services.workers import list_workers


def test_heartbeat_age_and_jobs_in_flight(redis_client: redis.Redis, keys: Keys, scripts: Scripts):
    now = server_time_ms(redis_client, keys.catalog.workers)
    beats = {"a.1.x": now - 1_500, "b.2.y": now - 90_000}
    redis_client.hset(keys.catalog.workers, mapping=beats)
    main, aux = (
        JobQueue(redis_client, keys, scripts, MAIN, keys.shards - 1),  # any shard counts
        JobQueue(redis_client, keys, scripts, AUX, None),
    )
    for i, job in enumerate((b"job-1", b"job-2")):
        main.push(job, now)
        assert main.acquire(f"a.1.x/{i}", 1) == job
    aux.push(b"monitor", now)
    # a worker that died holding a job: no heartbeat left
    assert aux.acquire("gone.3.z/aux", 1) == b"monitor"
    assert main.acquire("b.2.y/0", 0.01) is None  # registered, holding nothing
    found = {w.worker: w for w in list_workers(redis_client, keys, dead_after_ms=30_000)}
    assert set(found) == {"a.1.x", "b.2.y", "gone.3.z"}
    a, b, gone = found["a.1.x"], found["b.2.y"], found["gone.3.z"]
    assert (a.jobs_in_flight, a.alive, a.last_heartbeat) == (2, True, now - 1_500)
    assert 1_500 <= a.heartbeat_age_ms < 6_500
    assert (b.jobs_in_flight, b.alive) == (0, False)
    assert (gone.jobs_in_flight, gone.alive, gone.heartbeat_age_ms) == (1, False, None)


def test_a_worker_that_left_cleanly_is_not_listed(redis_client: redis.Redis, keys: Keys):
    assert (
        JobQueue(redis_client, keys, Scripts(redis_client), MAIN, 1).acquire("left.4.w/0", 0.01)
        is None
    )
    assert list_workers(redis_client, keys, dead_after_ms=30_000) == []
