"""Failover on a Redis Cluster under load: each master in turn hands over to its replica
(CLUSTER FAILOVER, what an operator or a managed service does for maintenance) while a
publisher publishes and workers deliver. Nothing that got a 204 is lost, deliveries
resume after every failover, and each subscriber still has one delivery in flight; one
with ordering keys (`concurrency: 4`) has many, never two holding one key, each key in
publish order."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dev import cluster as local
from spec.integration.bus import bus, fast_scrub
from spec.integration.faults import (
    Publisher,
    key_overlaps,
    out_of_order,
    replays,
    wait_for_numbers,
)
from spec.integration.layouts import cluster_layout, register
from spec.integration.processes import wait_until
from spec.integration.subscriber import Subscriber, serving

# each asserts a stand-still of seconds: not beside the suite's load, but beside the same
# tests on the other server (make test), which mostly wait out failovers too
pytestmark = pytest.mark.failover

SUBSCRIBERS = ("a", "b", "c", "d", "e", "f")
KEYED = "k"  # concurrency 4 over the publisher's 20 keys


def three_masters(tmp_path: Path, replicas: int) -> Iterator[local.LocalCluster]:
    with local.running(tmp_path / "cluster", 3, replicas, persistent=False) as started:
        yield started


@pytest.fixture
def twice_replicated(tmp_path: Path) -> Iterator[local.LocalCluster]:
    yield from three_masters(tmp_path, 2)


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[local.LocalCluster]:
    yield from three_masters(tmp_path, 1)


def replica_of(cluster: local.LocalCluster, master: local.Node) -> local.Node:
    (replica,) = [n for n in cluster.nodes if n.master_of is master]
    return replica


def fail_over(cluster: local.LocalCluster, master: local.Node) -> local.Node:
    """The replica of `master` takes over; returns it, now a master."""
    replica = replica_of(cluster, master)
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
    subs = {name: Subscriber(responder=lambda _: (200, 0.01)) for name in (*SUBSCRIBERS, KEYED)}
    with serving(subs["a"]), serving(subs["b"]), serving(subs["c"]), serving(subs["d"]), \
            serving(subs["e"]), serving(subs["f"]), serving(subs[KEYED]), \
            bus(layout.url, tmp_path, workers=2, **fast_scrub(4000)) as b:  # fmt: skip
        b.client("pub")
        for name, sub in subs.items():
            b.client(name)
            b.subscribe(name, sub.url, ["orders"], max=5 if name != KEYED else 2, timeout=50,
                        concurrency=4 if name == KEYED else 1)  # fmt: skip
        shards = {b.keys.shard_of(name) for name in SUBSCRIBERS}
        assert len(shards) >= 3, "the subscribers should spread over the nodes"
        with Publisher(b.base, "pub", "orders", chunk=5, pause=0.05, keys=20) as publisher:
            stalls = []
            time.sleep(2)  # publishing and delivering under way (each failover's window
            # below, 6 s and the wait for deliveries, is the next one's lead-in)
            for master in list(replicated.masters):
                before = sum(len(s.delivered) for s in subs.values())
                asked = time.monotonic()
                fail_over(replicated, master)
                time.sleep(6)
                stalls.append(publisher.longest_wait(asked - 1, time.monotonic()))
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
        f"longest stand-still of publishing per failover {[round(x, 2) for x in stalls]} s; "
        f"repeated batches {[len(replays(s).batches) for s in subs.values()]}"
    )
    assert len(wanted) > 300
    # a planned failover is no publish outage: 204s go on within 5 s (issue 27 measured
    # 20 s on an earlier tree)
    assert max(stalls) < 5, f"publishing stood still {max(stalls):.1f} s in a failover"
    assert publisher.statuses.get("204", 0) >= 0.9 * sum(publisher.statuses.values())
    assert all(sub.max_in_flight == 1 for name, sub in subs.items() if name != KEYED)
    assert subs[KEYED].max_in_flight > 1
    assert (key_overlaps(subs[KEYED]), out_of_order(subs[KEYED])) == ([], [])
    assert all(replays(sub).partial == 0 for sub in subs.values())
    assert "Traceback" not in logs


def killed(cluster: local.LocalCluster, master: local.Node) -> local.Node:
    """kill -9 of `master`; returns its replica once it has taken over on its own."""
    replica = replica_of(cluster, master)
    master.server.process.kill()
    master.server.process.wait()

    def promoted() -> bool:
        with replica.client() as c:
            return c.info("replication")["role"] == "master" and b"cluster_state:ok" in (
                c.execute_command("CLUSTER", "INFO")
            )

    wait_until(promoted, 30, f"the replica of :{master.port} to take over")
    replica.master_of = None
    cluster.nodes.remove(master)
    return replica


@pytest.mark.timeout(300)
def test_a_killed_master_under_publish_and_delivery(
    replicated: local.LocalCluster, tmp_path: Path
) -> None:
    """kill -9 of the master that holds the catalog (every publish goes through it): its
    replica takes over after the cluster's node timeout (2 s here), and publishing and
    delivery serve again within 5 s of the replica's promotion, without a hang: a
    publish meanwhile is answered (503) within the request timeout."""
    layout = cluster_layout(replicated.url)
    register(layout)
    sub = Subscriber(responder=lambda _: (200, 0.01))
    with serving(sub), bus(layout.url, tmp_path, workers=1, **fast_scrub(4000)) as b:
        b.client("pub"), b.client("s")
        b.subscribe("s", sub.url, ["orders"], max=5, timeout=50)
        holder = holder_of(replicated, b.keys.catalog.counters)
        with Publisher(b.base, "pub", "orders", chunk=5, pause=0.05) as publisher:
            time.sleep(2)
            killed_at = time.monotonic()
            killed(replicated, holder)
            promoted_at = time.monotonic()
            before = len(sub.delivered)
            # the first 204 after the kill, or 8 s past the promotion (asserted below)
            while time.monotonic() < promoted_at + 8 and not any(
                t > killed_at for t in publisher.answered_204
            ):  # fmt: skip
                time.sleep(0.05)
            wait_until(lambda: len(sub.delivered) > before + 20, 30, "deliveries after it")
        back = min((t for t in publisher.answered_204 if t > killed_at), default=float("inf"))
    print(
        f"\nkilled master: promoted {promoted_at - killed_at:.1f} s after the kill, publishing "
        f"back {back - killed_at:.1f} s after it ({dict(publisher.statuses)})"
    )
    assert back - promoted_at < 5, f"publishing back {back - promoted_at:.1f} s after promotion"
    assert set(publisher.statuses) <= {"204", "503"}, publisher.statuses


@pytest.mark.timeout(300)
def test_with_min_replicas_a_204d_event_survives_its_master_killed_right_after(
    twice_replicated: local.LocalCluster, tmp_path: Path
) -> None:
    """BUSBAR_REDIS_MIN_REPLICAS=1: a 204 means a replica holds the events. kill -9 of the
    master that holds the subscriber's batches, straight after a 204 and while the
    batches wait out their 2 s timeout there: its replica takes over with every event
    answered 204, and each is delivered. Two replicas a master: after the failover the
    other replica follows the new master, so writes find the one replica they wait for
    (with one, every write would be a 503 until the old master came back)."""
    layout = cluster_layout(twice_replicated.url)
    register(layout)
    sub = Subscriber(responder=lambda _: (200, 0.0))
    durable = {"BUSBAR_REDIS_MIN_REPLICAS": "1", **fast_scrub(4000)}
    with serving(sub), bus(layout.url, tmp_path, workers=1, **durable) as b:
        b.client("pub"), b.client("s")
        b.subscribe("s", sub.url, ["orders"], max=1000, timeout=2000)
        holder = holder_of(twice_replicated, b.keys.home("s").counters)
        with Publisher(b.base, "pub", "orders", chunk=5, pause=0.01) as publisher:
            wait_until(lambda: len(publisher.acked) >= 100, 30, "publishes answered 204")
            holder.server.process.kill()  # its last 204 was at most a publish ago
            at_kill = len(publisher.acked)
            wait_until(lambda: len(publisher.acked) >= at_kill + 50, 60, "204s after it")
        acked = set(publisher.acked)
        wait_for_numbers(sub, acked, 60, "every event answered 204")
    print(f"\ndurable publish across a killed master: {dict(publisher.statuses)}")
    assert set(publisher.statuses) <= {"204", "503"}, publisher.statuses


def holder_of(cluster: local.LocalCluster, key: str) -> local.Node:
    """The master that holds `key`'s slot."""
    with cluster.masters[0].client() as c:
        slot = int(c.execute_command("CLUSTER", "KEYSLOT", key))
        ranges = c.execute_command("CLUSTER", "SLOTS")
    (port,) = [int(master[1]) for low, high, master, *_ in ranges if low <= slot <= high]
    (node,) = [n for n in cluster.nodes if n.port == port]
    return node
