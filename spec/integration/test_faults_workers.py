"""Fault tests, worker side: kill -9 of workers under a steady load, with real processes
on loopback. What a user must see: every acknowledged publish delivered at least once,
and duplicates only where a kill interrupted a delivery (its batch, sent again whole).
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from contextlib import ExitStack, suppress
from pathlib import Path

import pytest
import redis

from app import codec
from app.models.keys import Keys
from app.models.queue import AUX, MAIN
from app.redis_client import server_time_ms
from spec.conftest import ROOT_KEY
from spec.integration.bus import Bus, bus, events, fast_scrub
from spec.integration.faults import Publisher, replays, wait_for_numbers
from spec.integration.processes import tcp_ports, wait_until
from spec.integration.subscriber import Received, Subscriber, serving

KILLS = 20
THREADS = 2  # delivery threads per worker: the most batches one kill can interrupt
MAX = 10  # events per batch
ENV = {
    # a killed worker's jobs come back 3-4 s after its last heartbeat (every 0.5 s): long
    # enough that a live worker on a loaded machine is never taken for dead
    **fast_scrub(3000),
    "BUSBAR_DELIVERY_CONCURRENCY": str(THREADS),
}


class PortOwners(threading.Thread):
    """Which worker process had each local TCP port. A worker whose delivery timed out
    on a loaded machine closes that connection, and if it is killed before it records
    the timeout its batch is sent again (at least once), though the connection is gone
    from its ports by the time of the kill. So each request's port is looked up while
    the subscriber is answering it (`note`, the connection certainly open then), and
    every port is sampled every 0.1 s besides: sampling alone missed a connection opened,
    answered in 50 ms and closed between two samples, and named no kill for its batch."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.bus: Bus | None = None
        self.owners: dict[int, set[int]] = {}
        self.done = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        while not self.done.wait(0.1):
            self.look()

    def note(self, port: int) -> None:
        """Called by the subscriber as a request arrives on `port`, its connection open:
        a port not seen before is looked up at once. Only those: looking at every request
        (parsing /proc's TCP table per worker, thousands of lines under make test's load)
        took so much of the test process that a new worker's start timed out."""
        with self.lock:
            seen = port in self.owners
        if not seen:
            self.look()

    def look(self) -> None:
        for worker in list(self.bus.workers if self.bus else ()):
            with suppress(OSError):  # gone between the listing and the read
                ports = tcp_ports(worker.pid)
                with self.lock:
                    for port in ports:
                        self.owners.setdefault(port, set()).add(worker.pid)


def holding(client: redis.Redis, keys: Keys, pid: int, patience: float = 2.0) -> bool:
    """Wait (a little) until the worker holds a delivery job, so the kill interrupts a
    delivery rather than an idle wait; whether it did or not, the test goes on."""
    marker = f".{pid}.".encode()
    lists = [
        shard.jobs_pending(MAIN, w.decode())
        for shard in keys.all_shards()
        for w in client.smembers(shard.jobs_pending_index(MAIN))
        if marker in w
    ]
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        if any(client.llen(name) for name in lists):
            return True
        time.sleep(0.005)
    return False


@pytest.mark.layout_free
@pytest.mark.timeout(240)  # about 50 s here; twenty worker starts on a loaded machine
def test_kill_9_of_workers_under_load_delivers_every_event(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Twenty kills under a steady load, on one Redis (`layout_free`: 100 s on a cluster,
    the suite's longest). What a kill leaves in Redis, a dead worker's jobs and batches
    in flight on each shard, taken back by the scrub, runs on a cluster in
    test_a_worker_killed_while_it_scrubs_does_not_stop_recovery (below),
    spec/integration/test_delivery.py's kill -9 during delivery and
    spec/integration/test_fencing.py; `make soak-cluster` kills workers under load on a
    cluster for minutes."""
    owners = PortOwners()

    def answer(request: Received) -> tuple[int, float]:
        owners.note(request.peer)
        # 50 ms keeps a delivery in flight much of the time, so kills interrupt some
        return 200, 0.05

    subs = {name: Subscriber(responder=answer) for name in "abcd"}
    with ExitStack() as stack:
        for sub in subs.values():
            stack.enter_context(serving(sub))
        b = stack.enter_context(bus(redis_url, tmp_path, workers=2, **ENV))
        owners.bus = b
        b.client("pub")
        for name, sub in subs.items():
            b.client(name)
            b.subscribe(name, sub.url, ["orders"], max=MAX, timeout=200)

        def requests_seen() -> int:
            return sum(len(sub.received) for sub in subs.values())

        kills: list[tuple[float, set[int]]] = []  # each kill's time, and its victim's ports
        victims: list[int] = []  # each kill's victim
        busy = 0  # kills that landed while the victim held a delivery job
        started = time.monotonic()
        owners.start()
        stack.callback(owners.done.set)
        with Publisher(b.base, "pub", "orders") as publisher:
            for _ in range(KILLS):
                seen = requests_seen()
                wait_until(lambda s=seen: requests_seen() > s + 3, 60, "deliveries between kills")
                victim = next(w for w in b.workers if w.poll() is None)  # the oldest alive
                busy += holding(redis_client, b.keys, victim.pid)
                os.kill(victim.pid, signal.SIGSTOP)  # still, so its sockets can be read
                ports = tcp_ports(victim.pid)
                os.kill(victim.pid, signal.SIGKILL)
                victim.wait()
                kills.append((time.time(), ports))
                victims.append(victim.pid)
                b.start_worker()
        wanted = set(publisher.acked)
        for name, sub in subs.items():
            wait_for_numbers(sub, wanted, 120, f"subscriber {name}")
        drained = time.monotonic() - started
        for name in subs:
            wait_until(lambda n=name: b.subscription(n)["events"]["queued"] == 0, 30, "queues")
        timed_out = {name: timeouts(b, name) for name in subs}

    assert publisher.statuses == {"204": len(wanted) // publisher.chunk}  # web never noticed
    found = {name: replays(sub) for name, sub in subs.items()}
    per_kill = [0] * KILLS
    timeouts_sent_again = 0  # a 50 ms answer past BUSBAR_TIMEOUT (1 s) on a loaded machine
    unexplained = []
    for name, r in found.items():
        for copy in r.copies:
            # the kill that interrupted it: the first after it arrived whose victim held
            # the connection it came on (a worker keeps its connections alive)
            # (or whose victim had that connection before: it may have closed it since)
            had = owners.owners.get(copy.peer, set())
            by = [
                k for k, (at, ports) in enumerate(kills)
                if at >= copy.at and (copy.peer in ports or victims[k] in had)
            ]  # fmt: skip
            if by:
                per_kill[by[0]] += 1
            elif any(start - 0.25 <= copy.at <= end + 0.25 for start, end in timed_out[name]):
                timeouts_sent_again += 1  # at least once: a timed-out batch is sent again
            else:
                unexplained.append(f"{name}: {copy.headers.get('webhook-id')} at {copy.at:.3f}")
    batches = sum(per_kill)
    duplicates = sum(r.events for r in found.values())
    print(
        f"\n{KILLS} kills ({busy} of a worker holding a delivery job), {len(wanted)} events x "
        f"{len(subs)} subscribers in {drained:.1f} s: "
        f"{batches} batches ({duplicates} events) delivered twice; per kill {per_kill}; "
        f"{timeouts_sent_again} sent again after a timeout; requests {requests_seen()}"
    )
    assert all(r.partial == 0 for r in found.values()), "a duplicate that was not a replay"
    # every batch sent again was first sent by a worker that was then killed, or timed out
    # (the attempt log says so: the bus gave up on the answer and sent the batch again)
    assert not unexplained, f"sent again, though neither killed nor timed out: {unexplained}"
    # a kill interrupts at most one batch per delivery thread (at least one per shard)
    assert max(per_kill) <= max(THREADS, b.keys.shards)
    assert duplicates <= (batches + timeouts_sent_again) * MAX
    # one delivery in flight per subscriber, even while jobs move between workers
    overlapping = {name: overlaps(sub, kills) for name, sub in subs.items()}
    assert all(sub.max_in_flight == 1 for sub in subs.values()), overlapping


def timeouts(b: Bus, name: str) -> list[tuple[float, float]]:
    """When each of a subscriber's timed-out attempts ran (start, end; s since the epoch),
    from the attempt log: `at` is when it was recorded, `duration_ms` how long it ran."""
    answer = b.call("GET", f"/subscribers/{name}/attempts?outcome=timeout&limit=1000", ROOT_KEY)
    assert answer.status_code == 200, answer.text
    return [
        ((a["at"] - a["duration_ms"]) / 1000, a["at"] / 1000) for a in answer.json()["attempts"]
    ]


def overlaps(sub: Subscriber, kills: list[tuple[float, set[int]]]) -> list[str]:
    """Requests to one subscriber in flight at once, each with its sender: a killed
    worker (by its kill's number) or a live one. What a failure must show."""

    def sender(r: Received) -> str:
        killed = [k for k, (at, ports) in enumerate(kills) if at >= r.at and r.peer in ports]
        return f"kill {killed[0]}" if killed else "a live worker"

    found = []
    ordered = sorted(sub.received, key=lambda r: r.started)
    for before, after in itertools.pairwise(ordered):
        if after.started < before.ended:
            found.append(
                f"{before.headers.get('webhook-id')} from {sender(before)} and "
                f"{after.headers.get('webhook-id')} from {sender(after)} "
                f"at {after.at:.3f}"
            )
    return found


def test_a_worker_killed_while_it_scrubs_does_not_stop_recovery(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """kill -9 can land while the dead worker itself runs ScrubQueues. Job uniqueness then
    made every later ScrubQueues push a no-op, so no job of any dead worker ever came back:
    its subscribers were stalled for good. Here Redis is left exactly as such a kill leaves
    it (the worker's delivery job and the ScrubQueues job in its threads' pending lists)."""
    dead = "deadhost.1.0a0b0c"
    with serving() as sub, bus(redis_url, tmp_path, workers=0, **fast_scrub(2500)) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=3, timeout=0)
        b.publish("pub", "orders", events(3))  # a full batch: its delivery job is instant
        home, catalog = b.keys.home("sub"), b.keys.catalog
        assert redis_client.lmove(
            home.jobs_instant(MAIN), home.jobs_pending(MAIN, f"{dead}/0"), "RIGHT", "LEFT"
        )
        scrub = codec.pack_job("scrub_queues", [])
        redis_client.sadd(catalog.jobs_index(AUX), scrub)
        redis_client.lpush(catalog.jobs_pending(AUX, f"{dead}/aux"), scrub)
        redis_client.sadd(home.jobs_pending_index(MAIN), f"{dead}/0")
        redis_client.sadd(catalog.jobs_pending_index(AUX), f"{dead}/aux")
        long_ago = server_time_ms(redis_client, catalog.workers) - 60_000
        for place in (catalog, home):
            redis_client.hset(place.workers, dead, long_ago)
        b.start_worker()
        assert [e["data"]["i"] for e in sub.wait_for(3, timeout=30)] == [0, 1, 2]
