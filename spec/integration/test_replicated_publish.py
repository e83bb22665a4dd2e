"""BUSBAR_REDIS_MIN_REPLICAS on a cluster, from outside: a publish's 204 waits for the
replicas of the masters it wrote to (the catalog's and its subscribers' shards'), not
for every master's (app/services/ingest.py's Queued). A master whose replica is
stopped holds back what is written to it, and nothing else: a publish that did not
touch it is answered at once, a write that did (or a view that fences every master)
is a 503 until the replica is back."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import requests
from redis.cluster import RedisCluster

from dev import cluster as local_cluster
from spec.conftest import ROOT_KEY
from spec.integration.bus import bus, events
from spec.integration.processes import stop

TIMEOUT_MS = 1000  # BUSBAR_REDIS_REPLICA_TIMEOUT_MS


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[local_cluster.LocalCluster]:
    with local_cluster.running(tmp_path / "cluster", 3, 1, persistent=False) as c:
        yield c


def token_on_another_master(keys: object, taken: set[int], fresh: RedisCluster) -> str:
    """A client token whose shard is on a master not in `taken` (by port)."""
    for i in range(1000):
        token = f"far{i}"
        fence = keys.home(token).fence  # type: ignore[attr-defined]
        if fresh.get_node_from_key(fence).port not in taken:
            return token
    raise AssertionError("no token's shard on the third master")


def test_a_publish_waits_only_for_the_masters_it_wrote_to(cluster, tmp_path: Path):
    env = {
        "BUSBAR_REDIS_CLUSTER": "1",
        "BUSBAR_REDIS_MIN_REPLICAS": "1",
        "BUSBAR_REDIS_REPLICA_TIMEOUT_MS": str(TIMEOUT_MS),
    }
    with bus(cluster.url, tmp_path, workers=0, **env) as b, ExitStack() as stack:
        b.client("pub")
        b.client("near")
        b.subscribe("near", "http://127.0.0.1:9/near", ["orders"])
        with RedisCluster.from_url(cluster.url) as fresh:
            written = {
                fresh.get_node_from_key(b.keys.catalog.fence).port,
                fresh.get_node_from_key(b.keys.home("near").fence).port,
            }
            far = token_on_another_master(b.keys, written, fresh)
            far_port = fresh.get_node_from_key(b.keys.home(far).fence).port
        b.client(far)
        b.subscribe(far, "http://127.0.0.1:9/far", ["invoices"])
        (stopped,) = [n for n in cluster.nodes if n.master_of and n.master_of.port == far_port]
        stop(stopped.server.process.pid)
        stack.callback(os.kill, stopped.server.process.pid, signal.SIGCONT)

        started = time.monotonic()
        b.publish("pub", "orders", events(3))  # 204: its masters' replicas hold it
        assert time.monotonic() - started < TIMEOUT_MS / 1000

        def invoice() -> requests.Response:
            return b.http.post(
                f"{b.base}/topics/invoices", json=events(1), auth=("pub", ""), timeout=10,
                headers={"Idempotency-Key": "invoice-1"},
            )  # fmt: skip

        b.publish("pub", "invoices", [])  # 204: it wrote nothing, so waits on nothing
        refused = invoice()
        assert refused.status_code == 503, refused.text
        assert refused.headers["Retry-After"] == "1"
        assert "BUSBAR_REDIS_MIN_REPLICAS" in refused.json()["error"]
        token = b.call("POST", "/api_tokens", ROOT_KEY, {"name": "later", "token": "later"})
        assert token.status_code == 503, token.text  # a view that fences every master

        stack.close()  # the replica answers again
        again = invoice()
        assert again.status_code == 204, again.text
        queued = [b.subscription(who)["events"]["queued"] for who in ("near", far)]
    assert queued == [3, 1]  # the repeat queued nothing twice
