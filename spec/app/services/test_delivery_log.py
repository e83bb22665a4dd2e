"""The delivery log: every acknowledged batch, appended in the step that deletes it."""

from __future__ import annotations

from app import codec
from spec.app.services.delivery_bench import Bench
from spec.integration.subscriber import Subscriber, serving


def log_entries(bench: Bench) -> list[codec.LoggedBatch]:
    key = bench.keys.home("sub").delivery_log
    return [codec.unpack_log_entry(fields) for _, fields in bench.client.xrange(key)]


def test_an_acknowledged_batch_is_logged_with_its_events(redis_client, keys, scripts):
    bench = Bench(redis_client, keys, scripts, max_backoff_ms=1)
    bench.client.hset(keys.tokens, "sub", "Subscriber Service")
    answers = iter([500])
    with serving(Subscriber(responder=lambda _: (next(answers, 200), 0.0))) as sub:
        bench.subscribe(sub.url, [{"topic": "orders", "priority": 3}], max=2, timeout=0)
        bench.publish(3)
        assert bench.run().kind == "failed"
        assert log_entries(bench) == []  # a failure is not a delivery
        bench.clock.advance(10)
        assert bench.run().kind == "delivered"
    (entry,) = log_entries(bench)
    assert entry.subscriber == "Subscriber Service"
    assert (entry.priority, entry.batch_id, entry.attempts) == (3, 1, 2)
    assert entry.created_at <= entry.first_attempt_at < entry.delivered_at
    assert [e.delivery() for e in entry.events] == sub.received[1].events
    assert redis_client.hlen(keys.first_attempt("sub")) == 0


def test_partitions_are_stable_per_subscriber(redis_client, keys, scripts):
    bench = Bench(redis_client, keys, scripts)
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], max=1, timeout=0)
        bench.publish(3)
        for _ in range(3):
            bench.run()
    entries = log_entries(bench)
    assert [e.batch_id for e in entries] == [1, 2, 3]
    assert [e.priority for e in entries] == [None] * 3
    others = [k for k in redis_client.keys("busbar:{s:*}:deliveries")]
    assert len(others) == 1


def test_the_log_can_be_switched_off(redis_client, keys, scripts):
    bench = Bench(redis_client, keys, scripts, delivery_log=False)
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], max=1, timeout=0)
        bench.publish(1)
        assert bench.run().kind == "delivered"
    assert redis_client.keys("busbar:{s:*}:deliveries") == []


def test_the_log_is_bounded(redis_client, keys, scripts):
    bench = Bench(redis_client, keys, scripts, delivery_log_maxlen=10)
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], max=1, timeout=0)
        bench.publish(300)
        for _ in range(300):
            bench.run()
    (key,) = redis_client.keys("busbar:{s:*}:deliveries")
    assert redis_client.xlen(key) < 300  # approximate trimming keeps whole macro nodes
    assert redis_client.xinfo_stream(key)["entries-added"] == 300
