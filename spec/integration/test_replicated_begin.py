"""With BUSBAR_REDIS_MIN_REPLICAS, a delivery is sent only from a begin a replica holds
(app/delivery/steps.py): `busbar web` and `busbar worker` on a real primary and its real
replica hold a due batch back, unsent and with no attempt counted, while the replica
is stopped, and deliver it once as soon as the replica answers again. Sent from the
primary alone, a failover could deliver the same events again in another batch: the
cluster soak found that (docs/tests.md)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dev import redis_server
from spec.conftest import ROOT_KEY
from spec.integration.bus import bus, events
from spec.integration.processes import stop, wait_until
from spec.integration.subscriber import Subscriber, serving

BATCH_WAIT_MS = 3000  # the subscription's `timeout`: the batch falls due after it


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[redis_server.RedisServer, redis_server.RedisServer]]:
    with redis_server.replicated(tmp_path) as both:
        yield both


def held_back(client: object, shard_counters: list[str]) -> int:
    return sum(int(client.hget(k, "delivery.held_back") or 0) for k in shard_counters)  # type: ignore[attr-defined]


def test_a_batch_is_held_back_while_no_replica_holds_its_begin(pair, tmp_path: Path):
    primary, replica = pair
    # the default replica timeout (1 s): CI's make test once saw a busy machine's replica
    # miss 200 ms, and POST /api_tokens then answered 503 before the test began
    env = {"BUSBAR_REDIS_MIN_REPLICAS": "1"}
    with serving(Subscriber()) as sub, bus(primary.url, tmp_path, **env) as b:
        b.client("pub")
        b.client("s")
        b.subscribe("s", sub.url, ["orders"], max=100, timeout=BATCH_WAIT_MS)
        b.publish("pub", "orders", events(3))  # 204: the replica holds the events
        stop(replica.process.pid)  # before the batch falls due
        counters = [s.counters for s in b.keys.all_shards()]
        with b.redis() as client:
            wait_until(lambda: held_back(client, counters) >= 2, 30, "the batch held back twice")
            assert sub.received == []  # never sent while no replica held its begin
            listed = b.call("GET", "/subscriptions", ROOT_KEY).json()
            assert [sum(s["attempts"].values()) for s in listed] == [0]  # none counted
            os.kill(replica.process.pid, signal.SIGCONT)
            wait_until(lambda: len(sub.received) == 1, 20, "the delivery once a replica holds it")
            time.sleep(1)
    assert [e["data"]["i"] for r in sub.received for e in r.events] == [0, 1, 2]
    assert "held back: its begin is not on a replica yet" in (tmp_path / "worker0.log").read_text()
