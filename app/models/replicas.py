"""BUSBAR_REDIS_MIN_REPLICAS: a write is acknowledged only once replicas hold it.

Redis replicates asynchronously: a write answered by the master and not yet copied is
lost if the master dies and its replica takes over. `WAIT n timeout` blocks until n
replicas have acknowledged every write the connection it is sent on has made. The web's
writes go through a pool (and on a cluster, to several nodes), so WAIT on its own
connection would cover nothing; instead, after a request's writes, each node gets a
barrier on one connection: a write to the node's fence key, then WAIT. The fence is
written after every write of the request was answered, and a master's replication
stream is one ordered log, so replicas that hold the fence hold all of them. A publish
names the places it wrote to (the catalog and its subscribers' shards: Queued, in
app/services/ingest.py), and only their masters are fenced; every other write fences
every master, since what it touched is not followed.

A node short of replicas in time is NotReplicated (HTTP 503 with Retry-After). What was
written stays written (a script is all or nothing, and WAIT undoes nothing): the client
is told it is not yet safe, and a publish repeated with its Idempotency-Key queues
nothing twice. The delivery engine sends the same barrier its own ways: after each
pipelined batch on one Redis (app/lua/pipe.py), and on the call's node on a cluster
(app/lua/replicated.py); its parts (the fence, WAIT, and when its answer holds) are
defined here, once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.exceptions import (
    AskError,
    ClusterDownError,
    MasterDownError,
    MovedError,
    TryAgainError,
)

from app.errors import NotReplicated
from app.models.keys import Keys, Place
from app.redis_client import is_cluster
from config.settings import Settings

log = logging.getLogger(__name__)
RETRY_MS = 1000  # the Retry-After of a 503 for a write short of replicas


# The barrier itself, the same wherever it is sent: the web's pool here, the engine's
# pipe on one Redis (app/lua/pipe.py), the call's node on a cluster (app/lua/replicated.py).


def fence_of(key: str | bytes) -> str:
    """The fence key in `key`'s slot: the same tag (`P{s:N}:`), then `fence` (as
    app/models/keys.py's Place.fence names it)."""
    text = key.decode() if isinstance(key, bytes) else key
    return text[: text.index("}:") + 2] + "fence"


def fenced(fence: str) -> tuple[Any, ...]:
    """The write that marks where the barrier stands in the node's replication stream."""
    return ("SET", fence, b"")


def wait(needed: int, timeout_ms: int) -> tuple[Any, ...]:
    """WAIT: blocks until `needed` replicas hold every write its connection made before."""
    return ("WAIT", needed, timeout_ms)


def held(acked: object, needed: int) -> bool:
    """Whether WAIT's answer says `needed` replicas hold what came before it (an error
    in its place says they were not seen to)."""
    return not isinstance(acked, Exception) and int(acked) >= needed  # type: ignore[call-overload]  # WAIT answers an integer


def moved(exc: redis.ResponseError) -> bool:
    """A cluster's answer that the key's slot is elsewhere now (MOVED, ASK) or that the
    cluster is between two layouts (CLUSTERDOWN, TRYAGAIN, MASTERDOWN). redis-py's
    parser raises MOVED and ASK as their own classes, whose text is the slot and the
    address without the word."""
    cluster_errors = (AskError, ClusterDownError, TryAgainError, MasterDownError)
    return isinstance(exc, cluster_errors) or str(exc).startswith(("MOVED", "ASK"))


class Replicas:
    """The barrier after a request's writes; does nothing unless the setting is on."""

    def __init__(self, client: redis.Redis, keys: Keys, settings: Settings) -> None:
        self._client = client
        self._keys = keys
        self.needed = settings.redis_min_replicas
        self._timeout_ms = settings.redis_replica_timeout_ms

    def confirm(self, places: Iterable[Place] | None = None) -> None:
        """Return once every node holding `places` (by default every one busbar writes
        to) has BUSBAR_REDIS_MIN_REPLICAS replicas holding what was written before this
        call; NotReplicated if one has not in time. A caller that knows where its writes
        went (a publish: the catalog and its subscribers' shards) names them, so the
        masters it did not write to are not waited on."""
        if self.needed == 0:
            return
        for acked in self._wait_all(self._fences(places)):
            if not held(acked, self.needed):
                log.warning(
                    "write not confirmed by %d replica(s) in %d ms (%d did): answered 503",
                    self.needed, self._timeout_ms, acked,
                )  # fmt: skip
                raise NotReplicated(
                    f"written, but {acked} of the {self.needed} replica(s) "
                    f"BUSBAR_REDIS_MIN_REPLICAS asks for confirmed it within "
                    f"{self._timeout_ms} ms; retry (with the same Idempotency-Key, a "
                    f"publish queues nothing twice)",
                    RETRY_MS,
                )

    def _wait_all(self, fences: list[tuple[redis.Redis, str]]) -> list[int]:
        """Each node's barrier (the fence, then WAIT) is sent before any answer is read,
        so the masters of a cluster wait for their replicas at the same time: a request
        waits as long as its slowest master, not the sum of them. The replicas that
        acknowledged, per node."""
        held: list[tuple[redis.ConnectionPool, redis.Connection]] = []
        acked: list[int] = []
        try:
            for node, fence in fences:
                pool = node.connection_pool
                connection = pool.get_connection()
                held.append((pool, connection))
                barrier = [fenced(fence), wait(self.needed, self._timeout_ms)]
                packed = connection.pack_commands(barrier)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                connection.send_packed_command(packed)  # type: ignore[no-untyped-call]  # as above
            for _, connection in held:
                connection.read_response()  # the fence's OK
                acked.append(int(connection.read_response()))
            return acked
        except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError):
            self._relearn()
            raise
        except redis.ResponseError as exc:
            if not is_cluster(self._client) or not moved(exc):
                raise
            # a failover moved the node's slots since the request's writes: whether they
            # reached a replica in time is unknown, which is what a 503 says
            self._relearn(exc)
            raise redis.ConnectionError(f"the cluster changed under the write ({exc})") from exc
        finally:
            for pool, connection in held:
                if len(acked) < len(held):  # answers left unread: no one else may read them
                    connection.disconnect()  # type: ignore[no-untyped-call]  # as above
                pool.release(connection)

    def _relearn(self, redirect: redis.ResponseError | None = None) -> None:
        """The layout read anew; and a MOVED's answer on top of it: the node asked is the
        authority on where its slot went, while the node the layout is read from may not
        have heard yet (Redis 7.0's replicas learn a moved slot by gossip: the next
        barrier still went to the old master there)."""
        if is_cluster(self._client):
            cluster: RedisCluster = self._client  # type: ignore[assignment]  # is_cluster said so
            try:
                cluster.nodes_manager.initialize()
            except redis.RedisError:
                log.debug("the cluster's topology could not be read yet")
            if isinstance(redirect, MovedError):
                cluster.nodes_manager.move_slot(redirect)

    def _fences(self, places: Iterable[Place] | None) -> list[tuple[redis.Redis, str]]:
        """One (client of the node, fence key on it) per node holding one of `places`
        (None: busbar's keys, every place; none for no place, a publish of `[]`)."""
        places = [self._keys.catalog, *self._keys.all_shards()] if places is None else [*places]
        if not places:
            return []
        if not is_cluster(self._client):
            return [(self._client, self._keys.catalog.fence)]
        cluster: RedisCluster = self._client  # type: ignore[assignment]  # is_cluster said so
        found: dict[str, tuple[redis.Redis, str]] = {}
        try:
            for place in places:
                node = cluster.get_node_from_key(place.fence)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                if node.name not in found and node.redis_connection is not None:
                    found[node.name] = (node.redis_connection, place.fence)
        except redis.RedisError:
            self._relearn()  # a failover moved the slots: learn them anew
            raise
        return list(found.values())
