"""Back-pressure (app/delivery/backpressure.py): a 429 or 503 with Retry-After is a wait,
not a failure. On a real server with a real HTTP subscriber: no health lost, no attempt
counted (so no dead letters), the batch kept at the head of its lane; and the header
read in both of its forms, within bounds."""

from __future__ import annotations

import email.utils
import time

import pytest

from app.delivery import backpressure
from app.models.attempt_result import answered, failed
from spec.app.delivery.delivery_bench import Bench
from spec.integration.subscriber import Subscriber, serving

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("status", "header", "wanted"),
    [
        (503, "2", 2000),
        (429, " 30 ", 30_000),
        (503, "0", backpressure.MIN_WAIT_MS),  # never a tight loop
        (503, "86400", 600_000),  # at most BUSBAR_MAX_RETRY_AFTER_S
        (503, email.utils.formatdate(NOW + 90, usegmt=True), 90_000),
        (429, email.utils.formatdate(NOW - 90, usegmt=True), backpressure.MIN_WAIT_MS),
        (503, "soon", None),  # says nothing: a failure like any other
        (503, "\u00b2", None),  # a Unicode digit float() refuses: says nothing either
        (503, "-5", None),
        (503, None, None),
        (500, "2", None),  # only 429 and 503 ask to wait
        (200, "2", None),
    ],
)
def test_what_a_retry_after_asks(status: int, header: str | None, wanted: int | None):
    assert backpressure.wait_ms(status, header, 600, now=NOW) == wanted


def test_the_wait_travels_with_the_result_and_shows_in_its_text():
    waiting = answered(503, 2000)
    assert (waiting.code, waiting.wait_ms, waiting.ok, waiting.held_back) == (
        503,
        2000,
        False,
        False,
    )
    assert (waiting.text, waiting.outcome) == ("503 retry-after 2000", "5xx")
    assert [r.wait_ms for r in (answered(503), failed("timeout"), answered(200))] == [None] * 3


class Answers:
    """A subscriber's answers, changed by the test as it goes."""

    def __init__(self, status: int, retry_after: str | None) -> None:
        self.status, self.sub = status, Subscriber(responder=lambda _: (self.status, 0.0))
        if retry_after is not None:
            self.sub.headers_out["Retry-After"] = retry_after


def attempts(bench: Bench, batch: int) -> int:
    return int(bench.client.lindex(bench.keys.batch("sub", batch), 2))


def test_a_503_asking_to_wait_loses_nothing_and_delivers_in_order(redis_client, keys, scripts):
    bench = Bench(redis_client, keys, scripts, max_backoff_ms=1)
    answers = Answers(503, "1")
    with serving(answers.sub) as sub:
        bench.subscribe(sub.url, ["orders"], max=1, timeout=0, max_attempts=1)
        bench.publish(2)
        before = bench.clock()
        outcome = bench.run()
        # a loaded machine's run takes a while: the wait counts from its answer
        after = bench.clock()
        assert (outcome.kind, outcome.status) == ("deferred", "503 retry-after 1000")
        due = int(bench.field("next_attempt_at"))
        assert due - before >= 900 and due - after <= 1200
        assert bench.field("health_points") in (None, "100")  # no health lost
        assert attempts(bench, 1) == 0  # not an attempt: max_attempts 1 dead-letters nothing
        assert bench.client.llen(bench.keys.deadletters("sub")) == 0
        assert bench.run().kind == "wait"  # waiting: not called again before its time
        assert len(sub.received) == 1
        answers.status = 200
        bench.clock.advance(1100)
        assert [bench.run().kind, bench.run().kind] == ["delivered", "delivered"]
        assert [r.events[0]["data"]["i"] for r in sub.received] == [0, 0, 1]
    assert bench.field("health_points") in (None, "100")


def test_a_429_with_an_http_date_waits_until_then(redis_client, keys, scripts):
    bench = Bench(redis_client, keys, scripts)
    then = email.utils.formatdate(time.time() + 5, usegmt=True)
    with serving(Answers(429, then).sub) as sub:
        bench.subscribe(sub.url, ["orders"], timeout=0)
        bench.publish(1)
        before = bench.clock()
        assert bench.run().kind == "deferred"
        # an HTTP date has whole seconds: the wait is 4-5 s from now
        assert 3900 <= int(bench.field("next_attempt_at")) - before <= 5200


def test_a_503_without_retry_after_is_a_failure(redis_client, keys, scripts):
    bench = Bench(redis_client, keys, scripts, max_backoff_ms=1)
    with serving(Answers(503, None).sub) as sub:
        bench.subscribe(sub.url, ["orders"], timeout=0, max_attempts=1)
        bench.publish(1)
        outcome = bench.run()
        assert (outcome.kind, outcome.status) == ("failed", "503")
    assert int(bench.field("health_points")) == 98
    assert bench.client.llen(bench.keys.deadletters("sub")) == 1  # its one attempt


def test_a_long_wait_is_cut_to_the_setting(redis_client, keys, scripts):
    bench = Bench(redis_client, keys, scripts, max_retry_after_s=3)
    with serving(Answers(503, "3600").sub) as sub:
        bench.subscribe(sub.url, ["orders"], timeout=0)
        bench.publish(1)
        assert bench.run().status == "503 retry-after 3000"
