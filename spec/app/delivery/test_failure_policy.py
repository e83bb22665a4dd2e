"""The failure policy (deliver_fail.lua, docs/delivery.md) on a real server with a real
HTTP subscriber: the delay grows from the first failure, a run of failures opens the
subscriber's circuit, probes while it is open never count toward max_attempts, and the
first success closes it and delivers the rest in order. What an operator reads about it
(GET /subscriptions' `circuit`) comes from the same fields."""

from __future__ import annotations

import time

import pytest

from app.models.subscriber_detail import detailed
from spec.app.delivery.delivery_bench import Bench
from spec.integration.subscriber import Subscriber, serving


class Switch:
    """A subscriber answering `status` until it is set to 200."""

    def __init__(self, status: int = 500) -> None:
        self.status = status
        self.sub = Subscriber(responder=lambda _: (self.status, 0.0))


def delay_after(bench: Bench) -> int:
    """How long the subscriber now waits, ms, from the failure just recorded."""
    return int(bench.field("next_attempt_at")) - int(time.time() * 1000)


def attempts(bench: Bench) -> int:
    """The head batch's attempts counted toward max_attempts."""
    ids = bench.client.lrange(bench.keys.lane("sub", 10), 0, 0)
    return int(bench.client.lindex(bench.keys.batch("sub", ids[0].decode()), 2))


def listed(bench: Bench) -> dict:
    return detailed(bench.store.describe(["sub"]))[0]


def retry_now(bench: Bench) -> None:
    """Let the backoff pass at once: the test looks at steps, not at the clock."""
    bench.client.hset(bench.keys.subscriber("sub"), "next_attempt_at", 0)


@pytest.mark.parametrize(
    ("lone_ms", "expected"),
    [(100, (100, 1000, 2000, 4000, 5000)), (0, (1000, 2000, 4000, 5000, 5000))],
)
def test_the_delay_grows_from_the_first_failure_and_is_capped(
    redis_client, keys, scripts, lone_ms, expected
):
    """A lone failure waits BUSBAR_RETRY_LONE_MS, the second in a row
    BUSBAR_RETRY_FIRST_MS, doubling from there to the cap; with no lone delay, the first
    delay from the first failure."""
    bench = Bench(redis_client, keys, scripts, retry_first_ms=1000, max_backoff_ms=5000,
                  retry_lone_ms=lone_ms, circuit_failures=10)  # fmt: skip
    with serving(Switch().sub) as sub:
        bench.subscribe(sub.url, ["orders"], timeout=0)
        bench.publish(1)
        waits = []
        for _ in range(5):
            assert bench.run().kind == "failed"
            waits.append(delay_after(bench))
            retry_now(bench)
    # each x1..1.5 (and a few ms of clock)
    for wait, low in zip(waits, expected, strict=True):
        assert low - 50 <= wait <= 1.5 * low, waits
    assert listed(bench)["circuit"] == {
        "state": "closed", "opened_at": None, "next_probe_at": None, "failures_in_a_row": 5,
    }  # fmt: skip
    assert int(bench.field("health_points")) == 90  # Routemaster's figure, as before


def test_an_endpoint_that_answered_lately_backs_off_from_the_lone_delay(
    redis_client, keys, scripts
):
    """Flaky, not down: within BUSBAR_RETRY_ALIVE_MS of a 2xx, failures in a row wait the
    lone delay doubling (a subscriber failing 30% of requests keeps up, bench.flaky);
    once the last 2xx is older, the schedule of an endpoint that is down, from the same
    count of failures in a row."""
    bench = Bench(redis_client, keys, scripts, retry_first_ms=1000, max_backoff_ms=5000,
                  retry_lone_ms=100, retry_alive_ms=10_000, circuit_failures=10)  # fmt: skip
    switch = Switch(200)
    with serving(switch.sub) as sub:
        bench.subscribe(sub.url, ["orders"], max=1, timeout=0)
        bench.publish(2)
        assert bench.run().kind == "delivered"
        switch.status = 500
        waits = []
        for _ in range(4):
            assert bench.run().kind == "failed"
            waits.append(delay_after(bench))
            retry_now(bench)
        for wait, low in zip(waits, (100, 200, 400, 800), strict=True):
            assert low - 50 <= wait <= 1.5 * low, waits
        last_ok = int(bench.field("ok_at"))  # 10 s ago and more: taken for down
        bench.client.hset(bench.keys.subscriber("sub"), "ok_at", last_ok - 10_000)
        assert bench.run().kind == "failed"
        assert 4_950 <= delay_after(bench) <= 7_500  # the 5th in a row: 1 s x 2^3, capped


def test_the_circuit_opens_probes_without_dead_lettering_and_closes_on_success(
    redis_client, keys, scripts
):
    bench = Bench(
        redis_client, keys, scripts,
        retry_first_ms=1, circuit_failures=3, circuit_probe_ms=10_000, circuit_outage_ms=0,
    )  # fmt: skip
    switch = Switch(503)  # without Retry-After: a failure like any other
    with serving(switch.sub) as sub:
        bench.subscribe(sub.url, ["orders"], max=1, timeout=0, max_attempts=4)
        bench.publish(3)
        for n in range(1, 4):
            assert bench.run().kind == "failed"
            assert attempts(bench) == n
            retry_now(bench) if n < 3 else None
        opened = listed(bench)["circuit"]
        assert opened["state"] == "open" and opened["failures_in_a_row"] == 3
        assert abs(opened["opened_at"] - time.time() * 1000) < 1000
        # the probe is one interval away (x1..1.5), and nothing is tried before it
        assert 10_000 - 50 <= opened["next_probe_at"] - opened["opened_at"] <= 15_000
        assert bench.run().kind == "wait" and len(sub.received) == 3
        for _ in range(5):  # a long outage: probes fail, the batch stays at max_attempts 4
            retry_now(bench)
            assert bench.run().kind == "failed"
            assert 9_950 <= delay_after(bench) <= 15_000
        assert attempts(bench) == 3
        assert bench.client.llen(bench.keys.deadletters("sub")) == 0
        assert listed(bench)["circuit"]["failures_in_a_row"] == 8
        switch.status = 200
        retry_now(bench)
        assert [bench.run().kind for _ in range(3)] == ["delivered"] * 3
        assert [r.events[0]["data"]["i"] for r in sub.received[-3:]] == [0, 1, 2]
    entry = listed(bench)
    assert entry["circuit"] == {
        "state": "closed", "opened_at": None, "next_probe_at": None, "failures_in_a_row": 0,
    }  # fmt: skip
    assert (entry["failures"], entry["deadletters"], entry["next_attempt_at"]) == (8, 0, None)
    counters = bench.client.hgetall(bench.keys.home("sub").counters)
    assert int(counters[b"circuit.opened"]) == int(counters[b"circuit.closed"]) == 1
    assert int(counters[b"circuit.probes"]) == 5


def test_the_circuit_opens_on_an_outage_not_on_a_burst_of_failures(redis_client, keys, scripts):
    """Failures in a row past the count open the circuit only once they span
    BUSBAR_CIRCUIT_OUTAGE_MS: a burst (as `concurrency` n makes, n failures at once)
    leaves it closed, each retry on its backoff; a 2xx between starts the span again
    (issue 53, defect 2: ten failures within a second of a 1.5 s outage opened it)."""
    bench = Bench(redis_client, keys, scripts, retry_first_ms=1, circuit_failures=3,
                  circuit_probe_ms=10_000, circuit_outage_ms=60_000)  # fmt: skip
    switch = Switch(503)
    with serving(switch.sub) as sub:
        bench.subscribe(sub.url, ["orders"], max=1, timeout=0)
        bench.publish(3)
        for _ in range(6):  # twice the count, within a second
            assert bench.run().kind == "failed"
            retry_now(bench)
        assert listed(bench)["circuit"]["state"] == "closed"
        assert listed(bench)["circuit"]["failures_in_a_row"] == 6
        began = int(bench.field("streak_at"))
        bench.client.hset(bench.keys.subscriber("sub"), "streak_at", began - 60_000)
        assert bench.run().kind == "failed"  # the outage has lasted a minute: it opens
        opened = listed(bench)["circuit"]
        assert opened["state"] == "open" and opened["failures_in_a_row"] == 7
        switch.status = 200
        retry_now(bench)
        assert [bench.run().kind for _ in range(3)] == ["delivered"] * 3
        assert len(sub.received) == 10
    assert bench.field("streak_at") is None  # a success ends the span with the streak


def test_max_attempts_counts_the_attempts_made_while_closed(redis_client, keys, scripts):
    """The failure that opens the circuit was made while closed: it counts, and with
    max_attempts reached the batch is dead-lettered as before; the next batch then goes
    out as the circuit's first probe."""
    bench = Bench(
        redis_client, keys, scripts, retry_first_ms=1, circuit_failures=2, circuit_outage_ms=0
    )
    with serving(Switch().sub) as sub:
        bench.subscribe(sub.url, ["orders"], max=1, timeout=0, max_attempts=2)
        bench.publish(2)
        assert bench.run().kind == "failed"
        retry_now(bench)
        assert bench.run().kind == "failed"
        assert listed(bench)["circuit"]["state"] == "open"
        assert bench.client.llen(bench.keys.deadletters("sub")) == 1
        retry_now(bench)
        assert bench.run().kind == "failed"  # a probe with the second batch
        assert attempts(bench) == 0
        assert len(sub.received) == 3


@pytest.mark.parametrize("status", [429, 503])
def test_a_wait_asked_for_leaves_the_failures_in_a_row_alone(
    redis_client, keys, scripts, status: int
):
    bench = Bench(
        redis_client, keys, scripts, retry_first_ms=1, circuit_failures=2, circuit_outage_ms=0
    )
    answers = iter([(500, None), (status, "1"), (500, None)])

    def responder(_request):
        code, wait = next(answers)
        sub.headers_out.pop("Retry-After", None)
        if wait:
            sub.headers_out["Retry-After"] = wait
        return code, 0.0

    sub = Subscriber(responder=responder)
    with serving(sub):
        bench.subscribe(sub.url, ["orders"], timeout=0)
        bench.publish(1)
        assert bench.run().kind == "failed"
        retry_now(bench)
        assert bench.run().kind == "deferred"
        assert listed(bench)["circuit"] == {
            "state": "closed", "opened_at": None, "next_probe_at": None, "failures_in_a_row": 1,
        }  # fmt: skip
        retry_now(bench)
        assert bench.run().kind == "failed"
        assert listed(bench)["circuit"]["state"] == "open"  # the second failure in a row
