"""BUSBAR_REDIS_MIN_REPLICAS on a real 3-master cluster with a replica each: every master
waits for its replica, all at the same time, and a slot moved between a request's
writes and its barrier is a 503 (not known to be safe), never a 500."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
import redis
from redis.cluster import RedisCluster

from app.errors import NotReplicated
from app.models.keys import keys_for
from app.models.replicas import Replicas
from app.redis_client import connect
from config.settings import Settings
from dev import cluster as local_cluster
from spec.conftest import ROOT_KEY
from spec.integration.processes import stop, wait_until

TIMEOUT_MS = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_cluster.LocalCluster]:
    with local_cluster.running(tmp_path_factory.mktemp("replicated"), 3, 1, persistent=False) as c:
        yield c


def settings(url: str, replicas: int) -> Settings:
    return Settings(
        redis_url=url, redis_cluster=True, root_key=ROOT_KEY, redis_min_replicas=replicas,
        redis_replica_timeout_ms=TIMEOUT_MS,
    )  # fmt: skip


def barrier(cluster: local_cluster.LocalCluster, replicas: int = 1) -> Replicas:
    given = settings(cluster.url, replicas)
    return Replicas(connect(given), keys_for(given), given)


def waits(cluster: local_cluster.LocalCluster) -> list[int]:
    """WAITs each master has run."""
    counts = []
    for node in cluster.masters:
        with node.client() as client:
            stats = client.info("commandstats").get("cmdstat_wait", {})
            counts.append(int(stats.get("calls", 0)))
    return counts


def test_every_master_waits_for_its_replica(cluster: local_cluster.LocalCluster):
    before = waits(cluster)
    barrier(cluster).confirm()
    assert [b - a for a, b in zip(before, waits(cluster), strict=True)] == [1, 1, 1]


def test_a_barrier_for_named_places_waits_only_on_their_masters(
    cluster: local_cluster.LocalCluster,
):
    """A publish names the places it wrote to: the other masters are not waited on."""
    shard = keys_for(settings(cluster.url, 1)).shard(0)
    with RedisCluster.from_url(cluster.url) as fresh:
        owner = fresh.get_node_from_key(shard.fence).port
    before = waits(cluster)
    barrier(cluster).confirm([shard, shard])
    ran = {n.port: b - a for n, a, b in zip(cluster.masters, before, waits(cluster), strict=True)}
    assert ran == {port: int(port == owner) for port in ran}


@pytest.mark.alone  # a latency: beside three test processes and Spark it took 0.78 s
def test_masters_short_of_replicas_answer_after_one_timeout(cluster: local_cluster.LocalCluster):
    """Every replica stopped: the masters wait at the same time, so the 503 comes after
    one BUSBAR_REDIS_REPLICA_TIMEOUT_MS, not one per master."""
    with ExitStack() as stack:
        for node in cluster.nodes:
            if node.master_of is not None:
                stop(node.server.process.pid)
                stack.callback(os.kill, node.server.process.pid, signal.SIGCONT)
        started = time.monotonic()
        with pytest.raises(NotReplicated):
            barrier(cluster).confirm()
        took = time.monotonic() - started
    assert TIMEOUT_MS / 1000 <= took < 2 * TIMEOUT_MS / 1000, took


def owners(cluster: local_cluster.LocalCluster, slot: int) -> set[int]:
    """The port each master's CLUSTER SLOTS names for `slot`."""
    found = set()
    for node in cluster.masters:
        with node.client() as client:
            for start, end, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
                if int(start) <= slot <= int(end):
                    found.add(int(master[1]))
    return found


def test_a_slot_moved_under_the_barrier_is_a_503_then_it_is_found(
    cluster: local_cluster.LocalCluster,
):
    """The catalog's fence slot handed to another master after the client learned where
    it was: MOVED is 'the cluster changed under the write', a ConnectionError the web
    answers 503 (redis-py raised it as MovedError, which the web answered 500); the
    client learns the new layout, and the next barrier holds."""
    replicas = barrier(cluster)
    replicas.confirm()  # the layout learned
    fence = keys_for(settings(cluster.url, 1)).catalog.fence
    with RedisCluster.from_url(cluster.url) as fresh:
        owner = fresh.get_node_from_key(fence).port
    old = next(n for n in cluster.masters if n.port == owner)
    new = next(n for n in cluster.masters if n.port != owner)
    with old.client() as client:
        slot = int(client.execute_command("CLUSTER", "KEYSLOT", fence))
        client.delete(fence)  # a slot is handed over empty, without a migration
    with new.client() as client:
        new_id = client.execute_command("CLUSTER", "MYID")
    for node in [new, old, *(n for n in cluster.masters if n not in (new, old))]:
        with node.client() as client:
            client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", new_id)
    with new.client() as client:  # its claim wins over any stale gossip of the old one
        client.execute_command("CLUSTER", "BUMPEPOCH")
    # under load, gossip sent before the hand-over can name the old master for a while
    # (over 20 s once, in a fresh-clone make test at 647ab1e): the client must learn one
    # layout, not a mix of the two
    wait_until(
        lambda: owners(cluster, slot) == {new.port}, 60, "every master to name the new owner"
    )
    with pytest.raises(redis.ConnectionError, match="the cluster changed under the write"):
        replicas.confirm()
    replicas.confirm()  # learned anew: the fence on its new master, waited for
