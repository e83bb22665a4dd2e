"""Failover on a Redis Cluster under load: each master in turn hands over to its replica
(CLUSTER FAILOVER, what an operator or a managed service does for maintenance) while a
publisher publishes and workers deliver. Nothing that got a 204 is lost, deliveries
resume after every failover, and each subscriber still has one delivery in flight."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dev import cluster as local
from spec.integration.bus import bus, fast_scrub
from spec.integration.faults import Publisher, replays, wait_for_numbers
from spec.integration.layouts import cluster_layout, register
from spec.integration.processes import wait_until
from spec.integration.subscriber import Subscriber, serving

SUBSCRIBERS = ("a", "b", "c", "d", "e", "f")


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[local.LocalCluster]:
    started = local.start(tmp_path / "cluster", masters=3, replicas=1, persistent=False)
    try:
        yield started
    finally:
        started.stop()


def fail_over(cluster: local.LocalCluster, master: local.Node) -> local.Node:
    """The replica of `master` takes over; returns it, now a master."""
    (replica,) = [n for n in cluster.nodes if n.master_of is master]
    with replica.client() as c:
        c.execute_command("CLUSTER", "FAILOVER")

    def promoted() -> bool:
        with replica.client() as c, master.client() as m:
            return (
                c.info("replication")["role"] == "master"
                and m.info("replication")["role"] == "slave"
                and b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO")
            )

    wait_until(promoted, 30, f"the replica of :{master.port} to take over")
    replica.master_of, master.master_of = None, replica
    return replica


@pytest.mark.timeout(300)
def test_failover_of_every_master_under_publish_and_delivery(
    replicated: local.LocalCluster, tmp_path: Path
) -> None:
    layout = cluster_layout(replicated.url)
    register(layout)
    subs = {name: Subscriber(responder=lambda r: (200, 0.01)) for name in SUBSCRIBERS}
    with serving(subs["a"]), serving(subs["b"]), serving(subs["c"]), serving(subs["d"]), \
            serving(subs["e"]), serving(subs["f"]), \
            bus(layout.url, tmp_path, workers=2, **fast_scrub(4000)) as b:  # fmt: skip
        b.client("pub")
        for name, sub in subs.items():
            b.client(name)
            b.subscribe(name, sub.url, ["orders"], max=5, timeout=50)
        shards = {b.keys.shard_of(name) for name in SUBSCRIBERS}
        assert len(shards) >= 3, "the subscribers should spread over the nodes"
        with Publisher(b.base, "pub", "orders", chunk=5, pause=0.05) as publisher:
            for master in list(replicated.masters):
                before = sum(len(s.delivered) for s in subs.values())
                time.sleep(2)
                fail_over(replicated, master)
                wait_until(  # deliveries resume after each failover
                    lambda n=before: sum(len(s.delivered) for s in subs.values()) > n + 20,
                    60,
                    "deliveries after the failover",
                )
            time.sleep(2)
        wanted = set(publisher.acked)
        for name, sub in subs.items():
            wait_for_numbers(sub, wanted, 120, f"subscriber {name}")
        logs = "".join(p.read_text() for p in tmp_path.glob("*.log"))

    print(
        f"\n3 failovers: {len(wanted)} events acknowledged to the publisher "
        f"({dict(publisher.statuses)}), every one delivered to {len(subs)} subscribers; "
        f"repeated batches {[len(replays(s).batches) for s in subs.values()]}"
    )
    assert len(wanted) > 300
    assert publisher.statuses.get("204", 0) >= 0.9 * sum(publisher.statuses.values())
    assert all(sub.max_in_flight == 1 for sub in subs.values())
    assert all(replays(sub).partial == 0 for sub in subs.values())
    assert "Traceback" not in logs
