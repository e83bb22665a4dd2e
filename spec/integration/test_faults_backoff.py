"""Fault tests, subscriber side, with real processes on loopback: a subscriber that times
out, answers 500 or hangs up is called less and less often (the failure policy of
docs/delivery.md: a delay from the first failure, then a circuit probed at an interval),
however many events keep arriving for it, and gets everything once it recovers.

The backoff and the wait a subscriber asks for are decided by the subscriber's own
scripts, on its own shard, alike on both layouts: those two tests are `layout_free`, and
their Redis part runs on a cluster in the composition matrix
(spec/integration/test_matrix.py: its `outage`, `dead_letters` and `retry_after` cells at
`concurrency` 1 and 4). The circuit's test runs on both layouts.
"""

from __future__ import annotations

import email.utils
import itertools
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
import redis

from spec.conftest import ROOT_KEY
from spec.integration.bus import bus, events
from spec.integration.faults import numbers, wait_for_numbers
from spec.integration.processes import wait_until
from spec.integration.subscriber import CLOSE, Received, Subscriber, serving

WINDOW_S = 20.0
LONE_MS, FIRST_MS, MAX_BACKOFF_MS, CIRCUIT, PROBE_MS = 100, 500, 60_000, 5, 4000
DAMAGE, TIMEOUT_S = -5, 1
ENV = {
    "BUSBAR_RETRY_LONE_MS": str(LONE_MS),
    "BUSBAR_RETRY_FIRST_MS": str(FIRST_MS),
    "BUSBAR_MAX_BACKOFF_MS": str(MAX_BACKOFF_MS),
    "BUSBAR_CIRCUIT_FAILURES": str(CIRCUIT),
    "BUSBAR_CIRCUIT_OUTAGE_MS": "0",
    "BUSBAR_CIRCUIT_PROBE_MS": str(PROBE_MS),
    "BUSBAR_HP_DAMAGE_RATE": str(DAMAGE),
    "BUSBAR_HP_HEAL_RATE": "1",
    "BUSBAR_TIMEOUT": str(TIMEOUT_S),
    "BUSBAR_CONNECT_TIMEOUT": "1",
    "BUSBAR_DELIVERY_CONCURRENCY": "4",
    # all 4 slots may serve the failing: at 20% one place would hold back two of the three
    # failing subscribers for seconds at a time (test_engine tests the share)
    "BUSBAR_FAILING_SHARE": "100",
}
# how each subscriber fails: (status, seconds before answering) while it is down
FAILURES = {"slow": (500, TIMEOUT_S + 0.5), "error": (500, 0.0), "hangup": (CLOSE, 0.0)}


def most_requests(window_s: float, request_s: float) -> int:
    """The most requests the policy lets a failing subscriber see in `window_s` from its
    first: each takes at least `request_s`, then the subscriber waits LONE_MS after the
    first, FIRST_MS x 2^(failures - 2) after the next (jitter at its least, x1) until
    CIRCUIT failures in a row open the circuit, then PROBE_MS between probes."""
    at, count = 0.0, 0
    while at <= window_s:
        count += 1
        backoff = LONE_MS if count == 1 else min(MAX_BACKOFF_MS, FIRST_MS * 2 ** (count - 2))
        delay = PROBE_MS if count >= CIRCUIT else backoff
        at += request_s + delay / 1000
    return count


def rate(requests: list[Received]) -> float:
    return (len(requests) - 1) / max(1e-3, requests[-1].at - requests[0].at)


@pytest.mark.layout_free
def test_backoff_holds_failing_subscribers_down_then_they_get_everything(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    released = threading.Event()

    def failing(status: int, delay: float) -> Subscriber:
        return Subscriber(responder=lambda _: (200, 0.0) if released.is_set() else (status, delay))

    subs = {name: failing(*how) for name, how in FAILURES.items()}
    reference = Subscriber()  # healthy: how fast busbar calls a subscriber that keeps up
    with ExitStack() as stack:
        for sub in (*subs.values(), reference):
            stack.enter_context(serving(sub))
        b = stack.enter_context(bus(redis_url, tmp_path, **ENV))
        b.client("pub"), b.client("reference")
        b.subscribe("reference", reference.url, ["bulk"], max=1, timeout=0)
        for name, sub in subs.items():
            b.client(name)
            b.subscribe(name, sub.url, ["orders"], max=5, timeout=0)
        b.publish("pub", "bulk", events(300))
        b.publish("pub", "orders", events(10))
        wait_until(lambda: all(s.received for s in subs.values()), 30, "first attempts")
        start = time.monotonic()
        published = 10
        while time.monotonic() - start < WINDOW_S + 1:  # new events must not bring retries
            b.publish("pub", "orders", events(5, published))
            published += 5
            time.sleep(1)
        seen = {
            name: [r for r in sub.received if r.at <= sub.received[0].at + WINDOW_S]
            for name, sub in subs.items()
        }
        for name in subs:  # each failed CIRCUIT times in a row by now: probed, not retried
            assert b.subscription(name)["circuit"]["state"] == "open", name
        released.set()
        for name, sub in subs.items():
            wait_for_numbers(sub, set(range(published)), 60, f"{name} after it recovered")
            wait_until(lambda n=name: b.subscription(n)["events"]["queued"] == 0, 30, "queues")
        reference.wait_for(300)

    unthrottled = rate(reference.received)
    report = [f"\nunthrottled (a healthy subscriber, batches of 1): {unthrottled:.0f} req/s"]
    for name, requests in seen.items():
        request_s = 0.9 * TIMEOUT_S if name == "slow" else 0.0  # 0.9: timestamps are loose
        bound = most_requests(WINDOW_S, request_s) + 1
        ceiling = WINDOW_S / TIMEOUT_S if name == "slow" else unthrottled * WINDOW_S
        report.append(
            f"{name}: {len(requests)} requests in {WINDOW_S:.0f} s = "
            f"{len(requests) / WINDOW_S:.2f} req/s (policy allows {bound}, without backoff "
            f"{ceiling:.0f}); after recovery {len(numbers(subs[name]))} of {published} events"
        )
        assert 3 <= len(requests) <= bound, report[-1]  # it retries, but no faster than this
        assert len(requests) < 0.75 * ceiling, report[-1]
    print("\n".join(report))
    # for a subscriber that fails fast, the policy itself is far below busbar's pace
    assert most_requests(WINDOW_S, 0.0) < 0.1 * unthrottled * WINDOW_S


@pytest.mark.layout_free
@pytest.mark.parametrize("form", ["seconds", "http-date"])
def test_a_subscriber_asking_to_wait_loses_nothing_and_resumes_in_order(
    redis_url: str, tmp_path: Path, form: str
) -> None:
    """`503 Retry-After: 1` (or the HTTP date a second from now) for 3 s (a deploy
    shedding load), then 204: a wait, not a failure. With `max_attempts: 2` nothing is
    dead-lettered, no health is lost, the subscriber is asked about once a second
    meanwhile, and every event arrives in order soon after it recovers."""
    recovers_at: list[float] = []

    def responder(request: Received) -> tuple[int, float]:
        if form == "http-date":  # whole seconds: 0-1 s from now, waited as at least 1 s
            sub.headers_out["Retry-After"] = email.utils.formatdate(time.time() + 1, usegmt=True)
        return (503 if time.time() < recovers_at[0] else 204), 0.0

    sub = Subscriber(responder=responder)
    sub.headers_out["Retry-After"] = "1"  # on every answer: only a 429 or 503 heeds it
    with serving(sub), bus(redis_url, tmp_path) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=2, timeout=0, max_attempts=2)
        recovers_at.append(time.time() + 3)
        b.publish("pub", "orders", events(6))
        wait_for_numbers(sub, set(range(6)), 30, "after the subscriber recovered")
        entry = b.subscription("sub")

    asked = [r for r in sub.received if r.status == 503]
    first_ok = min(r.at for r in sub.received if r.status == 204)
    assert 2 <= len(asked) <= 5, [round(r.at - asked[0].at, 2) for r in asked]
    assert first_ok - recovers_at[0] < 2.0  # within a wait of its recovery
    assert (entry["health_points"], entry["deadletters"], entry["failures"]) == (100, 0, 0)
    delivered = [e["data"]["i"] for e in sub.delivered]
    assert delivered == sorted(delivered) == list(range(6))


@pytest.mark.alone
def test_a_circuit_opens_probes_without_dead_lettering_and_closes_in_order(
    redis_url: str, tmp_path: Path
) -> None:
    """A subscriber down for 6 s with `max_attempts: 4`: three failures in a row open its
    circuit (listed, and in /metrics), it is probed once a second meanwhile, nothing goes
    to the dead letters however many probes fail, and the first success closes the
    circuit and delivers every event in order."""
    up = threading.Event()
    sub = Subscriber(responder=lambda _: (204 if up.is_set() else 500, 0.0))
    env = {"BUSBAR_RETRY_FIRST_MS": "100", "BUSBAR_CIRCUIT_FAILURES": "3",
           "BUSBAR_CIRCUIT_OUTAGE_MS": "0", "BUSBAR_CIRCUIT_PROBE_MS": "1000"}  # fmt: skip
    with serving(sub), bus(redis_url, tmp_path, **env) as b:
        b.client("pub"), b.client("sub")
        b.subscribe("sub", sub.url, ["orders"], max=2, timeout=0, max_attempts=4)
        b.publish("pub", "orders", events(6))
        wait_until(lambda: b.subscription("sub")["circuit"]["state"] == "open", 10, "circuit")
        opened = b.subscription("sub")["circuit"]
        metrics = b.call("GET", "/metrics", ROOT_KEY).text
        assert 'busbar_subscriber_circuit_open{subscriber="sub"} 1.0' in metrics
        assert opened["next_probe_at"] >= opened["opened_at"] + 1000
        time.sleep(6)
        entry = b.subscription("sub")
        assert entry["circuit"]["state"] == "open" and entry["deadletters"] == 0
        up.set()
        wait_for_numbers(sub, set(range(6)), 10, "after the subscriber recovered")
        wait_until(lambda: b.subscription("sub")["events"]["queued"] == 0, 10, "queue")
        entry = b.subscription("sub")

    failed = [r.at for r in sub.received if r.status == 500]
    gaps = [b - a for a, b in itertools.pairwise(failed)]
    assert all(0.09 <= g <= 0.4 for g in gaps[:2]), gaps  # 100 ms, then 200 ms (x1..1.5)
    assert all(0.95 <= g <= 1.6 for g in gaps[2:]), gaps  # probes: once a second (x1..1.5)
    assert 4 <= len(gaps[2:]) <= 7, gaps
    assert entry["circuit"] == {
        "state": "closed", "opened_at": None, "next_probe_at": None, "failures_in_a_row": 0,
    }  # fmt: skip
    assert (entry["deadletters"], entry["failures"]) == (0, len(failed))
    delivered = [e["data"]["i"] for e in sub.delivered]
    assert delivered == list(range(6))
