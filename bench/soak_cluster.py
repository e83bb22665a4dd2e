"""The cluster soak's processes and faults (bench.soak --cluster): a Redis Cluster of
three masters with a replica each, every node and every worker in a network of its own
(bench.netns), so that a master can be cut off from the other nodes while the bus
still reaches it, and a worker from Redis while it still reaches its subscribers.

The node faults, beside the worker and web faults of the one-Redis soak: kill -9 of a
master (its replica takes over; it comes back on its data as a replica), SIGSTOP of a
master past the node timeout then SIGCONT, a planned CLUSTER FAILOVER, a master cut off
from every other node (its replica included) past the node timeout, and a worker cut
off from every node past the scrub window. After each, the soak waits until the
cluster is whole again (every node `cluster_state:ok`, every master with an in-sync
replica) before the next: one fault at a time.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass, field

import redis

from bench.netns import Host, Network
from bench.soak_faults import PROCESS_FAULTS, Cast, Fault
from dev.cluster import LocalCluster, Node
from spec.integration.processes import wait_until

NODE_TIMEOUT_S = 2.0  # dev/cluster's cluster-node-timeout
WHOLE_S = 90.0  # most the soak waits for the cluster to be whole again after a fault


@dataclass
class ClusterCast(Cast):
    """The cast, plus the cluster's nodes, the network and where each worker runs."""

    cluster: LocalCluster = field(default_factory=LocalCluster)
    net: Network | None = None
    nodes_at: dict[int, Host] = field(default_factory=dict)  # node port -> its host
    workers_at: dict[int, Host] = field(default_factory=dict)  # worker pid -> its host
    free_hosts: list[Host] = field(default_factory=list)  # worker hosts not in use
    replicas: int = 1  # each master's

    def start_worker(self, instead_of: subprocess.Popen | None = None) -> None:
        host = self.workers_at.pop(instead_of.pid) if instead_of else self.free_hosts.pop()
        process = self.bus.start_worker(prefix=host.prefix)
        self.workers_at[process.pid] = host

    def role(self, node: Node) -> str:
        try:
            with node.client() as c:
                return str(c.info("replication")["role"])
        except redis.RedisError:  # down, or loading its AOF
            return "down"

    def masters(self) -> list[Node]:
        return [n for n in self.cluster.nodes if self.role(n) == "master"]

    def replica_of(self, master: Node) -> Node:
        """The node replicating `master` now."""
        for node in self.cluster.nodes:
            with node.client() as c:
                info = c.info("replication")
            if info["role"] == "slave" and int(info["master_port"]) == master.port and \
                    info["master_host"] == master.host:  # fmt: skip
                return node
        raise RuntimeError(f"no replica of {master.host}:{master.port}")

    def whole(self) -> bool:
        """Every node up and `cluster_state:ok`, three masters, each with its replicas in
        sync: the cluster as it was before the fault, whichever node holds which role."""
        masters, synced = 0, 0
        for node in self.cluster.nodes:
            try:
                with node.client() as c:
                    if b"cluster_state:ok" not in c.execute_command("CLUSTER", "INFO"):
                        return False
                    info = c.info("replication")
            except redis.RedisError:  # down, or loading
                return False
            if info["role"] == "master":
                masters += 1
            elif info.get("master_link_status") == "up":
                synced += 1
        return masters == 3 and synced == 3 * self.replicas

    def wait_whole(self, after: str) -> None:
        try:
            wait_until(self.whole, WHOLE_S, "the cluster to be whole again")
        except AssertionError:
            self.problems.append(f"the cluster was not whole {WHOLE_S:.0f} s after {after}")

    def nodes_ips(self) -> list[str]:
        return [h.ip for h in self.nodes_at.values()]


def pick_master(cast: ClusterCast, rng: random.Random) -> Node:
    return rng.choice(cast.masters())


def master_kill9(cast: Cast, rng: random.Random) -> str:
    """A master crashes: its replica takes over after the node timeout; it comes back on
    its AOF and nodes.conf, and follows the new master."""
    assert isinstance(cast, ClusterCast)
    victim = pick_master(cast, rng)
    os.kill(victim.server.process.pid, signal.SIGKILL)
    victim.server.process.wait()
    wait_until(lambda: len(cast.masters()) == 3, WHOLE_S, "a replica to take over")
    time.sleep(rng.uniform(0, 3))
    victim.restart()
    cast.wait_whole("a master's kill -9")
    return f"master {victim.host}:{victim.port}"


def master_sigstop(cast: Cast, rng: random.Random) -> str:
    """A master frozen past the node timeout (a stalled VM): its replica takes over, and
    when it wakes it finds it is a replica now."""
    assert isinstance(cast, ClusterCast)
    victim = pick_master(cast, rng)
    frozen = NODE_TIMEOUT_S * rng.uniform(1.5, 2.5)
    os.kill(victim.server.process.pid, signal.SIGSTOP)
    time.sleep(frozen)
    os.kill(victim.server.process.pid, signal.SIGCONT)
    cast.wait_whole("a master's SIGSTOP")
    return f"master {victim.host}:{victim.port}, {frozen:.1f} s"


def planned_failover(cast: Cast, rng: random.Random) -> str:
    """CLUSTER FAILOVER on a replica: the maintenance an operator or a managed service
    does, with no write lost by design."""
    assert isinstance(cast, ClusterCast)
    master = pick_master(cast, rng)
    replica = cast.replica_of(master)
    with replica.client() as c:
        c.execute_command("CLUSTER", "FAILOVER")
    wait_until(lambda: cast.role(replica) == "master", WHOLE_S, "the replica to take over")
    cast.wait_whole("a planned failover")
    return f"{replica.host}:{replica.port} took over from {master.host}:{master.port}"


def master_partition(cast: Cast, rng: random.Random) -> str:
    """A master cut off from every other node, its replica included, past the node
    timeout, while the bus still reaches it: it stops taking writes once it has lost
    the majority, its replica is elected on the other side, and when the cut heals it
    follows the new master, dropping whatever it took in between."""
    assert isinstance(cast, ClusterCast)
    victim = pick_master(cast, rng)
    host = cast.nodes_at[victim.port]
    cut = NODE_TIMEOUT_S * rng.uniform(1.5, 3)
    host.cut([ip for ip in cast.nodes_ips() if ip != host.ip])
    time.sleep(cut)
    host.heal()
    cast.wait_whole("a master's partition")
    return f"master {victim.host}:{victim.port} cut off {cut:.1f} s"


def worker_partition(cast: Cast, rng: random.Random) -> str:
    """A worker cut off from every Redis node past the scrub window, its subscribers
    still in reach: its jobs go to the others, and when the cut heals it must change
    nothing it no longer holds."""
    assert isinstance(cast, ClusterCast)
    pid = rng.choice([w.pid for w in cast.alive_workers()])
    host = cast.workers_at[pid]
    cut = cast.scrub_after_s + rng.uniform(1, 3)
    host.cut(cast.nodes_ips())
    time.sleep(cut)
    host.heal()
    return f"worker {pid} cut off {cut:.1f} s"


CLUSTER_FAULTS: dict[str, Fault] = {
    **PROCESS_FAULTS,
    "kill -9 a master": master_kill9,
    "SIGSTOP a master": master_sigstop,
    "CLUSTER FAILOVER": planned_failover,
    "cut a master off": master_partition,
    "cut a worker off": worker_partition,
}
