"""BUSBAR_REDIS_MIN_REPLICAS for the engine's calls on a cluster (app/lua/replicated.py),
on a real cluster of one master and its replica: a call is answered once the replica
holds it; short of replicas (more asked for than exist), after the timeout, with a
warning, and what the call did stands."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio.cluster

from app.lua import AsyncScripts
from app.lua.replicated import fence_of
from app.models import job_calls
from app.models.keys import Keys
from dev import cluster as local

TIMEOUT_MS = 200


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local.LocalCluster]:
    with local.running(tmp_path_factory.mktemp("cluster"), 1, 1, persistent=False) as started:
        yield started


def test_the_fence_is_in_the_calls_slot():
    keys = Keys("P:", 4)
    assert fence_of(keys.shard(3).jobs_index("main")) == keys.shard(3).fence
    assert fence_of(keys.catalog.counters.encode()) == keys.catalog.fence


def push_with(url: str, replicas: int, job: bytes) -> tuple[object, float, bool]:
    async def run() -> tuple[object, float, bool]:
        client = redis.asyncio.cluster.RedisCluster.from_url(url)
        scripts = AsyncScripts(client, 2, replicas, TIMEOUT_MS)  # type: ignore[arg-type]
        try:
            started = time.monotonic()
            queue = Keys("busbar:", 1).shard(0)
            reply, confirmed = await scripts.confirmed(job_calls.push(queue, "main", job, 0, 0))
            return reply, time.monotonic() - started, confirmed
        finally:
            await scripts.close()
            await client.aclose()

    return asyncio.run(run())


def test_a_call_is_answered_once_its_replica_holds_it(replicated, caplog):
    with caplog.at_level(logging.WARNING, logger="app.lua.replicated"):
        reply, _, confirmed = push_with(replicated.url, 1, b"held")
    # No warning is the proof the replica confirmed within the timeout: the wall clock
    # also counts the client's first connection and script load, which a loaded
    # machine (CI, under xdist) can stretch past 200 ms on its own.
    assert (reply, caplog.text, confirmed) == (1, "", True)
    (replica,) = [n for n in replicated.nodes if n.master_of is not None]
    with replica.client() as r:  # a replica answers reads on a connection told READONLY
        pipe = r.pipeline(transaction=False)
        pipe.execute_command("READONLY")
        pipe.sismember(Keys("busbar:", 1).shard(0).jobs_index("main"), b"held")
        assert pipe.execute()[1]  # the call's write, on the replica by the time it answered


def test_short_of_replicas_the_call_stands_and_says_so(replicated, caplog):
    with caplog.at_level(logging.WARNING, logger="app.lua.replicated"):
        reply, took, confirmed = push_with(replicated.url, 2, b"short")
    # the caller is told: a delivery such a call began is held back (app/delivery/steps.py)
    assert reply == 1 and took >= TIMEOUT_MS / 1000 and not confirmed
    assert "not confirmed by 2 replica(s)" in caplog.text
    with redis.Redis(port=replicated.masters[0].port) as master:
        queue = Keys("busbar:", 1).shard(0)
        assert master.sismember(queue.jobs_index("main"), b"short")
