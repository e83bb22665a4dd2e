"""A `busbar worker` out of open files, from outside. One fan-out to 30 subscribers on
one origin leaves 30 connections kept alive, idle; then the worker's open-files limit
is lowered (prlimit on the running process) to 10 descriptors past what it holds, and
a fan-out to 30 more on another origin needs 30. The idle ones give way
(app/delivery/kept.py: the budget, the limit less the spare kept for Redis and the
rest, is passed): every event arrives once, no attempt fails, and the worker says why
it closed them. Before, each connect that met EMFILE was a failed attempt of
a subscriber that did nothing wrong."""

from __future__ import annotations

import os
import resource
from pathlib import Path

from app.services.counters import totals
from spec.integration.bus import bus
from spec.integration.processes import wait_until
from spec.integration.test_origins import CountingServer, counting

ROOM = 10  # descriptors the worker may open past those it holds after the first fan-out


class DeepQueue(CountingServer):
    request_queue_size = 128  # takes 30 connects at once: the worker keeps 30 open


def test_idle_connections_give_way_when_the_worker_is_out_of_open_files(
    redis_url: str, tmp_path: Path
):
    with (
        counting(0.5, DeepQueue) as first,
        counting(0.5, DeepQueue) as second,
        bus(redis_url, tmp_path, workers=0) as b,
    ):
        worker = b.start_worker(BUSBAR_DELIVERY_CONCURRENCY="32")
        b.client("pub")
        for name, origin in (("a", first), ("b", second)):
            port = origin.server_address[1]
            for i in range(30):
                b.client(f"{name}{i}")
                b.subscribe(f"{name}{i}", f"http://127.0.0.1:{port}/{name}/{i}", [f"fan_{name}"],
                            timeout=0, max=1)  # fmt: skip
        b.publish("pub", "fan_a", {"type": "create", "url": "https://o.test/1"})
        client = b.redis()

        def acknowledged(n: int) -> bool:
            return int(totals(client, b.keys).get(b"delivery.events", 0)) == n

        wait_until(lambda: acknowledged(30), 30, "the first origin's 30 acknowledgements")
        kept = first.open  # every answer taken: these are idle, kept alive
        assert kept > 2 * ROOM, kept
        held = len(os.listdir(f"/proc/{worker.pid}/fd"))
        _, hard = resource.prlimit(worker.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(worker.pid, resource.RLIMIT_NOFILE, (held + ROOM, hard))
        b.publish("pub", "fan_b", {"type": "create", "url": "https://o.test/2"})
        wait_until(lambda: len(second.arrivals) == 30, 30, "the second origin's 30 events")
        wait_until(lambda: acknowledged(60), 10, "every acknowledgement")
        counted = totals(client, b.keys)
        client.close()
    assert int(counted.get(b"delivery.failures", 0)) == 0
    assert set(first.arrivals.values()) == set(second.arrivals.values()) == {1}
    log = (tmp_path / "worker0.log").read_text()
    assert f"at the open-files limit: closed {kept} kept-alive callback connections" in log
