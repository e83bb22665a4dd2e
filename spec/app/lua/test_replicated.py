"""BUSBAR_REDIS_MIN_REPLICAS for the engine's calls on a cluster (app/lua/replicated.py),
on a real cluster of one master and its replica: a call is answered once the replica
holds it, the call and its WAIT in one round trip once the script is loaded (the
client's way, then a fence and WAIT, when it is not); short of replicas (more asked for
than exist), after the timeout, with a warning, and what the call did stands; a call
whose slot moved reaches its new master."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator

import pytest
import redis
import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import ClusterDownError

from app.lua import AsyncScripts
from app.models import job_calls
from app.models.keys import Keys
from app.models.replicas import fence_of
from app.redis_client import connect_async
from config.settings import Settings
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


def push_with(
    url: str, replicas: int, *jobs: bytes | Callable[[], object]
) -> tuple[object, float, bool]:
    """Each job pushed in turn on one client (a callable in their place: run there); the
    last call's reply, time and confirmation."""

    async def run() -> tuple[object, float, bool]:
        client = redis.asyncio.cluster.RedisCluster.from_url(url)
        scripts = AsyncScripts(client, 2, replicas, TIMEOUT_MS)  # type: ignore[arg-type]
        queue = Keys("busbar:", 1).shard(0)
        try:
            for job in jobs:
                if callable(job):
                    job()
                    continue
                started = time.monotonic()
                reply, confirmed = await scripts.confirmed(job_calls.push(queue, "main", job, 0, 0))
            return reply, time.monotonic() - started, confirmed
        finally:
            await scripts.close()
            await client.aclose()

    return asyncio.run(run())


def calls(port: int) -> dict[str, int]:
    """How many of each command the node has run."""
    with redis.Redis(port=port) as node:
        stats = node.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def on_replica(cluster: local.LocalCluster, job: bytes) -> bool:
    (replica,) = [n for n in cluster.nodes if n.master_of is not None]
    with replica.client() as r:  # a replica answers reads on a connection told READONLY
        pipe = r.pipeline(transaction=False)
        pipe.execute_command("READONLY")
        pipe.sismember(Keys("busbar:", 1).shard(0).jobs_index("main"), job)
        return bool(pipe.execute()[1])


def test_a_loaded_script_and_its_wait_are_one_round_trip(replicated, caplog):
    """Loaded, a call and its WAIT go together on one connection, no fence. The client's
    way, then a fence write and WAIT, when the call did not run there: the layout not
    learned yet, or the script not loaded (a restarted Redis, say)."""
    port = replicated.masters[0].port

    def flush() -> None:
        with redis.Redis(port=port) as master:
            master.script_flush()

    flush()
    before = calls(port)
    with caplog.at_level(logging.WARNING, logger="app.lua.replicated"):
        reply, _, confirmed = push_with(replicated.url, 1, b"a", b"b", b"c", flush, b"d")
    ran = {k: calls(port).get(k, 0) - before.get(k, 0) for k in ("evalsha", "set", "wait")}
    # a, the layout not learned: the client's way: EVALSHA (NOSCRIPT), SCRIPT LOAD,
    # EVALSHA, the fence's SET and WAIT; b and c: EVALSHA and WAIT; d: EVALSHA and WAIT
    # (NOSCRIPT: it did not run), then the client's way as for a
    assert ran == {"evalsha": 2 + 2 + 3, "set": 2, "wait": 1 + 2 + 2}
    assert (reply, caplog.text, confirmed) == (1, "", True)
    assert all(on_replica(replicated, job) for job in (b"a", b"b", b"c", b"d"))


def test_a_call_is_answered_once_its_replica_holds_it(replicated, caplog):
    with caplog.at_level(logging.WARNING, logger="app.lua.replicated"):
        reply, _, confirmed = push_with(replicated.url, 1, b"held")
    # No warning is the proof the replica confirmed within the timeout: the wall clock
    # also counts the client's first connection and script load, which a loaded
    # machine (CI, under xdist) can stretch past 200 ms on its own.
    assert (reply, caplog.text, confirmed) == (1, "", True)
    assert on_replica(replicated, b"held")  # the call's write, there by the time it answered


def test_short_of_replicas_the_call_stands_and_says_so(replicated, caplog):
    with caplog.at_level(logging.WARNING, logger="app.lua.replicated"):
        reply, took, confirmed = push_with(replicated.url, 2, b"short")
    # the caller is told: a delivery such a call began is held back (app/delivery/steps.py)
    assert reply == 1 and took >= TIMEOUT_MS / 1000 and not confirmed
    assert "not confirmed by 2 replica(s)" in caplog.text
    with redis.Redis(port=replicated.masters[0].port) as master:
        queue = Keys("busbar:", 1).shard(0)
        assert master.sismember(queue.jobs_index("main"), b"short")


def test_a_call_whose_slot_moved_reaches_its_new_master(tmp_path):
    """The call sent with its WAIT to the master the client knew is answered MOVED: it
    did not run there, so it goes the client's way, which follows the redirect."""
    with local.running(tmp_path, 2, 0, persistent=False) as two:
        queue = Keys("busbar:", 1).shard(0)

        async def run() -> tuple[object, bool]:
            client = redis.asyncio.cluster.RedisCluster.from_url(two.url)
            scripts = AsyncScripts(client, 2, 1, TIMEOUT_MS)  # type: ignore[arg-type]
            try:
                await scripts.confirmed(job_calls.push(queue, "main", b"before", 0, 0))
                move(two, queue.fence)
                return await scripts.confirmed(job_calls.push(queue, "main", b"after", 0, 0))
            finally:
                await scripts.close()
                await client.aclose()

        reply, confirmed = asyncio.run(run())
        assert (reply, confirmed) == (1, False)  # pushed; no replica exists to hold it
        with redis.cluster.RedisCluster.from_url(two.url) as fresh:
            assert fresh.smembers(queue.jobs_index("main")) == {b"after"}


def move(cluster: local.LocalCluster, key: str) -> None:
    """`key`'s slot handed, emptied, to the other master; every master told."""
    with redis.cluster.RedisCluster.from_url(cluster.url) as fresh:
        owner = fresh.get_node_from_key(key).port
    (old,) = [n for n in cluster.masters if n.port == owner]
    (new,) = [n for n in cluster.masters if n.port != owner]
    with old.client() as client:
        slot = int(client.execute_command("CLUSTER", "KEYSLOT", key))
        for held in client.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
            client.delete(held)
    with new.client() as client:
        new_id = client.execute_command("CLUSTER", "MYID")
    for node in (new, old):
        with node.client() as client:
            client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", new_id)
    with new.client() as client:
        client.execute_command("CLUSTER", "BUMPEPOCH")


def test_a_lost_connection_is_reported_and_calls_find_the_node_again(tmp_path):
    """The master killed under a call sent with its WAIT: a ConnectionError, as the engine
    expects of any lost call (not sent again: whether it ran is unknown). Once the node
    is back, calls go the client's way, which learns the layout anew, until one succeeds;
    then with their WAIT in one trip again."""
    with local.running(tmp_path, 1, 0, persistent=True) as one:
        (master,) = one.masters
        queue = Keys("busbar:", 1).shard(0)

        async def run() -> dict[str, int]:
            settings = Settings(redis_url=one.url, redis_cluster=True)
            client = connect_async(settings, connections=4, timeout=5.0)
            scripts = AsyncScripts(client, 2, 1, TIMEOUT_MS)  # type: ignore[arg-type]

            async def push(job: bytes) -> object:
                return (await scripts.confirmed(job_calls.push(queue, "main", job, 0, 0)))[0]

            try:
                assert [await push(b"a"), await push(b"b")] == [1, 1]
                master.server.process.kill()
                master.server.process.wait()
                with pytest.raises(redis.ConnectionError):
                    await push(b"lost")
                master.restart()
                for _ in range(100):  # the client's way, till the node answers it
                    try:
                        assert await push(b"c") == 1
                        break
                    except (redis.ConnectionError, ClusterDownError):  # back, not yet ok
                        await asyncio.sleep(0.1)
                before = calls(master.port)
                assert await push(b"d") == 1
                return {k: calls(master.port).get(k, 0) - before.get(k, 0) for k in ("set", "wait")}
            finally:
                await scripts.close()
                await client.aclose()

        assert asyncio.run(run()) == {"set": 0, "wait": 1}  # d: one trip, no fence
        with redis.cluster.RedisCluster.from_url(one.url) as fresh:
            assert {b"c", b"d"} <= fresh.smembers(queue.jobs_index("main"))


def test_the_redis_py_internals_it_uses_are_where_it_expects(replicated):
    """app/lua/replicated.py is the one module that uses redis-py's cluster internals
    (PipelineCommand, ClusterNode.execute_pipeline, RedisCluster.get_node_from_key): a
    redis-py upgrade that moves or changes them fails here, by name, rather than as
    deliveries whose replicas are never confirmed."""
    from redis.asyncio.cluster import ClusterNode, PipelineCommand, RedisCluster

    async def run() -> list[object]:
        client = RedisCluster.from_url(replicated.url)
        try:
            await client.initialize()
            node = client.get_node_from_key("internals")
            assert isinstance(node, ClusterNode)
            commands = [PipelineCommand(0, "SET", "internals", b"1"),
                        PipelineCommand(1, "GET", "internals")]  # fmt: skip
            await node.execute_pipeline(commands)
            return [command.result for command in commands]
        finally:
            await client.aclose()

    assert asyncio.run(run()) == [True, b"1"]
