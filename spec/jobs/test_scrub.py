"""ScrubQueues and ScrubWorkers against a real server, with processes of thousands of
delivery slots: a dead process's jobs come back in a few scripts, a live one costs one
per queue, whatever its slot count."""

from __future__ import annotations

import redis

from app.lua import Scripts
from app.models import job_calls
from app.models.keys import Keys
from config.settings import Settings
from jobs.context import JobContext
from jobs.scrub import scrub_queues, scrub_workers

SLOTS = 3000


def evalsha_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def holding(client: redis.Redis, keys: Keys, process: str, job: bytes) -> None:
    """`process` with SLOTS slots in every shard's pending index, its last slot holding
    `job` on shard 0: as thousands of watching slots leave it."""
    for place in keys.all_shards():
        client.sadd(place.jobs_pending_index("main"), *[f"{process}/{i}" for i in range(SLOTS)])
    home = keys.all_shards()[0]
    client.lpush(home.jobs_pending("main", f"{process}/{SLOTS - 1}"), job)
    client.sadd(home.jobs_index("main"), job)


def test_a_dead_process_of_thousands_of_slots_is_scrubbed_in_a_few_calls(
    redis_client: redis.Redis, settings: Settings, keys: Keys, scripts: Scripts
):
    ctx = JobContext(settings, redis_client, keys, scripts)
    holding(redis_client, keys, "dead.1.aa", b"job-of-the-dead")
    scripts.run(job_calls.heartbeat(keys.all_shards()[0], "alive.2.bb"))
    holding(redis_client, keys, "alive.2.bb", b"job-of-the-living")
    for place in keys.all_shards():
        scripts.run(job_calls.heartbeat(place, "alive.2.bb"))
    before = evalsha_calls(redis_client)
    scrub_queues(ctx, [], "w", b"")
    calls = evalsha_calls(redis_client) - before
    # per shard: the dead process in 3000 / 500 = 6 chunks, the living one in one call
    # (and one EVALSHA refused with NOSCRIPT the first time the script is used)
    assert calls <= keys.shards * (SLOTS // 500 + 1) + 1
    home = keys.all_shards()[0]
    assert redis_client.lrange(home.jobs_instant("main"), 0, -1) == [b"job-of-the-dead"]
    assert redis_client.llen(home.jobs_pending("main", f"alive.2.bb/{SLOTS - 1}")) == 1


def test_scrub_workers_forgets_every_slot_of_a_long_dead_process(
    redis_client: redis.Redis, settings: Settings, keys: Keys, scripts: Scripts
):
    ctx = JobContext(settings, redis_client, keys, scripts)
    holding(redis_client, keys, "dead.1.aa", b"job")
    scrub_workers(ctx, [], "w", b"")
    for place in keys.all_shards():
        assert redis_client.scard(place.jobs_pending_index("main")) == 0
    assert redis_client.lrange(keys.all_shards()[0].jobs_instant("main"), 0, -1) == [b"job"]
