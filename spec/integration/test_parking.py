"""Deliveries parked at a busy origin (app/delivery/parking.py), from outside: a `busbar
worker` with 4 slots, whose subscribers' callbacks share one slow origin held to 2
connections. A delivery waiting its turn there holds no slot, so a subscriber on another
origin is served at once; nothing parked is held back and begun again while its lease
lasts; a worker stopped with deliveries parked gives them back unsent, at once."""

from __future__ import annotations

import time
from pathlib import Path

from app.services.counters import totals
from spec.integration.bus import Bus, bus, fast_scrub
from spec.integration.processes import wait_until
from spec.integration.subscriber import serving
from spec.integration.test_origins import CountingServer, counting

HELD = {"BUSBAR_DELIVERY_CONCURRENCY": "4", "BUSBAR_ORIGIN_CONNECTIONS": "2",
        "BUSBAR_ORIGIN_CONNECTIONS_MAX": "2"}  # fmt: skip
EVENT = {"type": "create", "url": "https://o.test/1"}


def _slow_subscribers(b: Bus, origin: CountingServer, n: int) -> None:
    port = origin.server_address[1]
    b.client("pub")
    for i in range(n):
        b.client(f"s{i}")
        b.subscribe(f"s{i}", f"http://127.0.0.1:{port}/s/{i}", ["slow"], timeout=0, max=1)


def _counted(b: Bus, name: bytes) -> int:
    client = b.redis()
    try:
        return int(totals(client, b.keys).get(name, 0))
    finally:
        client.close()


def test_a_busy_origin_holds_no_slot_and_nothing_waiting_there_is_begun_twice(
    redis_url: str, tmp_path: Path
):
    """Six deliveries of 2 s to an origin held to 2 connections: 2 send, 4 wait their turn
    (4 s for the last). Before parking, the worker's 4 slots all waited there, and a
    subscriber on another origin published to meanwhile waited about 2 s for a slot."""
    with counting(answer_s=2.0) as origin, serving() as fast, bus(redis_url, tmp_path, **HELD) as b:
        _slow_subscribers(b, origin, 6)
        b.client("f")
        b.subscribe("f", fast.url, ["fast"], timeout=0, max=1)
        b.publish("pub", "slow", [EVENT])
        wait_until(lambda: origin.open == 2, 10, "the slow origin's 2 connections in use")
        time.sleep(0.3)  # the other 4 deliveries taken and waiting in its line
        sent = time.monotonic()
        b.publish("pub", "fast", [EVENT])
        fast.wait_for(1, 10)
        waited = fast.received[0].started - sent
        wait_until(lambda: len(origin.arrivals) == 6, 20, "all 6 slow subscribers' events")
        wait_until(lambda: _counted(b, b"delivery.events") == 7, 10, "every acknowledgement")
        held_back, failures = _counted(b, b"delivery.held_back"), _counted(b, b"delivery.failures")
    assert waited < 1.0, f"the other origin's subscriber waited {waited:.2f} s for a slot"
    assert set(origin.arrivals.values()) == {1}
    assert origin.most_open <= 2
    assert held_back == 0 and failures == 0, (held_back, failures)


def test_a_worker_stopped_with_deliveries_parked_gives_them_back_unsent(
    redis_url: str, tmp_path: Path
):
    """SIGTERM while 2 deliveries send and 4 are parked: the 2 finish and are acknowledged,
    the 4 are held back at once (not sent after their turn, seconds later), and the
    worker exits as soon as the 2 are done; a new worker delivers the 4, each once."""
    with counting(answer_s=2.0) as origin, bus(redis_url, tmp_path, **HELD) as b:
        _slow_subscribers(b, origin, 6)
        b.publish("pub", "slow", [EVENT])
        wait_until(lambda: origin.open == 2, 10, "the slow origin's 2 connections in use")
        time.sleep(0.3)
        worker = b.workers[0]
        stopped = time.monotonic()
        worker.terminate()
        assert worker.wait(30) == 0
        took = time.monotonic() - stopped
        assert len(origin.arrivals) == 2, origin.arrivals  # the parked 4 were never sent
        b.start_worker()
        wait_until(lambda: len(origin.arrivals) == 6, 30, "the 4 held back, from a new worker")
        wait_until(lambda: _counted(b, b"delivery.events") == 6, 10, "every acknowledgement")
        failures = _counted(b, b"delivery.failures")
    assert took < 4.0, f"the worker took {took:.1f} s to stop"  # 2 s answers, then out
    assert set(origin.arrivals.values()) == {1}
    assert failures == 0


def test_a_parked_delivery_past_its_lease_is_held_back_not_lost(redis_url: str, tmp_path: Path):
    """A scrub window of 4 s leaves a delivery 2 s of lease: parked behind answers of
    1.8 s on one connection, the later ones are held back at the end of their lease,
    unsent, and begun again later; every subscriber has its event once, none failed."""
    env = {**HELD, **fast_scrub(4000, timeout_s=2), "BUSBAR_ORIGIN_CONNECTIONS": "1",
           "BUSBAR_ORIGIN_CONNECTIONS_MAX": "1"}  # fmt: skip
    with counting(answer_s=1.8) as origin, bus(redis_url, tmp_path, **env) as b:
        _slow_subscribers(b, origin, 4)
        b.publish("pub", "slow", [EVENT])
        wait_until(lambda: len(origin.arrivals) == 4, 40, "all 4 subscribers' events")
        wait_until(lambda: _counted(b, b"delivery.events") == 4, 10, "every acknowledgement")
        held_back, failures = _counted(b, b"delivery.held_back"), _counted(b, b"delivery.failures")
    assert set(origin.arrivals.values()) == {1}
    assert origin.most_open == 1
    assert held_back > 0 and failures == 0, (held_back, failures)
