"""The delivery scripts and service against a real server and a real HTTP subscriber."""

from __future__ import annotations

import pytest

from app import codec
from app.delivery.plan import Draws
from app.lua import Scripts
from app.models.queue import JobQueue
from app.models.subscription import parse_subscription
from spec.app.delivery.delivery_bench import JOB, WORKER, Bench
from spec.integration.subscriber import Subscriber, serving
from spec.view import counter


@pytest.fixture
def bench(redis_client, keys, scripts) -> Bench:
    return Bench(redis_client, keys, scripts)


def test_delivers_a_full_batch_in_routemaster_format(bench: Bench):
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], max=3, uuid="the-uuid")
        bench.publish(4)
        outcome = bench.run()
        assert (outcome.kind, outcome.events, outcome.status) == ("delivered", 3, "200")
        (request,) = sub.received
        assert request.user == "the-uuid"
        assert request.content_type == "application/json"
        assert [e["url"] for e in request.events] == [f"https://o.test/{i}" for i in range(3)]
        assert set(request.events[0]) == {"topic", "type", "url", "t", "data"}
    assert int(bench.field("sent")) == 3
    assert int(bench.client.hget(bench.keys.home("sub").event_gauge, "sub")) == 1
    assert int(bench.client.hget(bench.keys.home("sub").batch_gauge, "sub")) == 1
    # the partial batch left is due after the timeout: the job waits in scheduled
    assert bench.job_states() == ["scheduled"]


def test_a_batch_that_is_not_due_is_not_sent(bench: Bench):
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], max=10, timeout=60_000)
        bench.publish(2)
        outcome = bench.run()
        assert outcome.kind == "wait"
        assert sub.received == []
        assert bench.job_states() == ["scheduled"]


def test_timeout_makes_a_partial_batch_due(bench: Bench):
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], max=10, timeout=0)
        bench.publish(2)
        assert bench.run().kind == "delivered"
        assert len(sub.received[0].events) == 2
        assert bench.run().kind == "idle"  # nothing left: the job is gone
    assert bench.job_states() == []


def test_higher_lane_goes_first_and_lanes_never_mix(bench: Bench):
    with serving() as sub:
        routes = [{"topic": "orders", "priority": 1, "types": ["delete"]}, {"topic": "orders"}]
        bench.subscribe(sub.url, routes, max=2, timeout=0)
        bench.publish(3, "create")
        bench.publish(3, "delete", start=10)
        for _ in range(4):
            assert bench.run().kind == "delivered"
        kinds = [[e["type"] for e in r.events] for r in sub.received]
        assert kinds == [["delete", "delete"], ["delete"], ["create", "create"], ["create"]]


def test_failure_backs_off_and_the_batch_is_retried(redis_client, keys, scripts):
    # after a first failure the delay is BUSBAR_RETRY_FIRST_MS x 1..1.5: 100-150 ms here
    bench = Bench(redis_client, keys, scripts, retry_first_ms=100)
    answers = iter([500, 200])
    with serving(Subscriber(responder=lambda _: (next(answers), 0.0))) as sub:
        bench.subscribe(sub.url, ["orders"], max=2, timeout=0)
        bench.publish(2)
        assert bench.run().status == "500"
        assert int(bench.field("health_points")) == 98
        assert int(bench.field("next_attempt_at")) > bench.clock()
        assert bench.job_states() == ["scheduled"]
        assert bench.run().kind == "wait"  # in backoff: the subscriber is not called
        assert len(sub.received) == 1
        bench.clock.advance(300)
        assert bench.run().kind == "delivered"
        assert [len(r.events) for r in sub.received] == [2, 2]
        assert int(bench.field("health_points")) == 99


def test_connection_errors_are_failures(bench: Bench):
    bench.subscribe("http://127.0.0.1:9/nobody", ["orders"], timeout=0)
    bench.publish(1)
    assert bench.run().status == "connection_refused"
    header = bench.client.lrange(bench.keys.batch("sub", 1), 0, 2)
    assert int(header[2]) == 1  # one attempt counted


def test_max_attempts_moves_events_to_dead_letters(redis_client, keys, scripts):
    bench = Bench(redis_client, keys, scripts, max_backoff_ms=1)
    with serving(Subscriber(responder=lambda _: (503, 0.0))) as sub:
        bench.subscribe(sub.url, ["orders"], max=5, timeout=0, max_attempts=2)
        bench.publish(2)
        assert bench.run().kind == "failed"
        bench.clock.advance(10)
        assert bench.run().kind == "failed"
        assert len(sub.received) == 2
    dead = [
        codec.unpack_dead_letter(d) for d in redis_client.lrange(keys.deadletters("sub"), 0, -1)
    ]
    assert [(d.event.url, d.attempts, d.last_status) for d in dead] == [
        ("https://o.test/0", 2, "503"),
        ("https://o.test/1", 2, "503"),
    ]
    assert counter(redis_client, keys, "events.deadlettered") == 2
    assert int(redis_client.hget(keys.home("sub").event_gauge, "sub")) == 0
    bench.clock.advance(10)
    assert bench.run().kind == "idle"


def test_expired_events_are_dropped_and_never_sent(redis_client, keys, scripts):
    bench = Bench(redis_client, keys, scripts)
    with serving() as sub:
        bench.subscribe(sub.url, [{"topic": "orders", "ttl": 1}, {"topic": "users"}], timeout=0)
        bench.publish(2)  # expires after 1 s
        bench.clock.advance(1100)
        bench.publish(1, topic="users", start=5)
        assert bench.run().kind == "delivered"
        assert [e["url"] for r in sub.received for e in r.events] == ["https://o.test/5"]
    assert counter(redis_client, keys, "events.expired") == 2
    assert int(bench.field("expired")) == 2
    assert int(redis_client.hget(keys.home("sub").event_gauge, "sub")) == 0


def test_events_published_during_a_delivery_get_a_job(bench: Bench):
    """The race docs/internals.md names: ingest sees the job pending and does not push it;
    the acknowledgement must then reschedule it, or the new batch would be orphaned."""
    published = []

    def publish_while_in_flight(_request) -> tuple[int, float]:
        if not published:
            published.append(True)
            bench.publish(1, start=100)
        return 200, 0.0

    with serving(Subscriber(responder=publish_while_in_flight)) as sub:
        bench.subscribe(sub.url, ["orders"], max=1, timeout=0)
        bench.publish(1)
        assert bench.run().kind == "delivered"
        assert bench.job_states() == ["instant"]
        assert bench.run().kind == "delivered"
        assert [r.events[0]["url"] for r in sub.received] == [
            "https://o.test/0",
            "https://o.test/100",
        ]


def test_a_subscriber_deleted_during_delivery_finishes_cleanly(bench: Bench):
    def delete_while_in_flight(_request) -> tuple[int, float]:
        assert bench.store.delete("sub") == 2
        return 200, 0.0

    with serving(Subscriber(responder=delete_while_in_flight)) as sub:
        bench.subscribe(sub.url, ["orders"], max=1, timeout=0)
        bench.publish(2)
        assert bench.run().kind == "gone"  # answered, but there is nothing left to settle
        assert len(sub.received) == 1
    assert bench.job_states() == []
    assert bench.client.hget(bench.keys.home("sub").event_gauge, "sub") is None


def test_a_subscriber_with_more_due_is_served_in_one_run_of_its_job(redis_client, keys, scripts):
    """While more is due at once, each ack begins the next batch in the same script (one
    round trip a batch, not three), up to 16 in a row; then the job goes back in line."""
    bench = Bench(redis_client, keys, scripts, max_run=16)
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], max=1, timeout=0)
        bench.publish(20)
        bench.take()
        for name in scripts.names():  # loaded, so no call meets NOSCRIPT (it counts as one)
            redis_client.script_load(scripts.loaded(name).text)
        calls = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"]
        outcome = bench.delivery.run("sub", WORKER, JOB)
        used = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"] - calls
        assert (outcome.kind, len(sub.received)) == ("delivered", 16)
        assert used == 1 + 16  # the begin, then one ack a batch (each beginning the next)
        assert bench.job_states() == ["instant"]  # behind the other subscribers' jobs
        assert bench.run().kind == "delivered"  # the last 4
        assert bench.job_states() == []  # nothing left: no job
        assert [r.events[0]["url"] for r in sub.received] == [
            f"https://o.test/{i}" for i in range(20)
        ]
    assert int(bench.field("sent")) == 20


def test_a_failed_batch_does_not_go_on(redis_client, keys, scripts):
    bench = Bench(redis_client, keys, scripts, max_run=16, max_backoff_ms=60_000)
    with serving(Subscriber(responder=lambda _r: (500, 0.0))) as sub:
        bench.subscribe(sub.url, ["orders"], max=1, timeout=0)
        bench.publish(3)
        assert bench.run().kind == "failed"
        assert len(sub.received) == 1
    assert bench.job_states() == ["scheduled"]  # after its backoff


def test_a_fan_out_costs_one_script_call_a_delivery(bench: Bench, scripts: Scripts):
    """One event for three subscribers: the sweep takes the first job and begins it; each
    acknowledgement then takes the next job and begins it in the same step, so a worker
    thread makes one Redis call per delivery instead of two (ack, then a sweep)."""
    tokens = ["fa", "fb", "fc"]
    queues = [JobQueue(bench.client, bench.keys, scripts, "main", n)
              for n in range(bench.keys.shards)]  # fmt: skip
    with serving() as sub:
        for token in tokens:
            body = {"topics": ["fan"], "callback": f"{sub.url}/{token}", "timeout": 0}
            sub_ = parse_subscription(body, allow_http=True, policy=bench.policy)
            bench.store.subscribe(token, sub_, 0)
        bench.publish(1, topic="fan")
        for script in ("deliver_take", "deliver_ack"):  # loaded, so no call meets NOSCRIPT
            bench.client.script_load(scripts.loaded(script).text)
        calls = bench.client.info("commandstats")["cmdstat_evalsha"]["calls"]
        taken = bench.delivery.take(queues, WORKER)
        delivered = []
        while taken is not None:
            queue, job, flight = taken.queue, taken.job, taken.flight
            outcome = bench.delivery.run(codec.unpack_job(job)[1][0], WORKER, job, flight, queues)
            assert outcome.kind == "delivered"
            delivered.append(flight.pid)
            assert queue.states(job) == []  # settled: nothing else was queued for it
            taken = outcome.taken
            if taken is not None:  # held by this worker, its delivery in flight
                assert taken.queue.states(taken.job) == ["pending"]
        assert sorted(delivered) == tokens
        assert sorted(r.path.rsplit("/", 1)[1] for r in sub.received) == tokens
        assert bench.client.info("commandstats")["cmdstat_evalsha"]["calls"] - calls == 1 + 3


def test_nonces_and_salts_never_repeat_across_pages_of_randomness():
    """Fencing needs a fresh nonce per delivery: draws cut from one page, then the next."""
    draws = Draws()
    pairs = [draws.nonce_and_salt() for _ in range(3 * Draws.PAGE // 24)]
    nonces, salts = [n for n, _ in pairs], [s for _, s in pairs]
    assert len(set(nonces)) == len(nonces) and len(set(salts)) == len(salts)
    assert {len(n) for n in nonces} == {16} and {len(s) for s in salts} == {32}
