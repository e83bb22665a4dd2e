"""The shard's two logs for the lake: the delivery log, every acknowledged batch appended
in the step that deletes it; the attempt stream, every attempt appended in the step that
settles it, by client name."""

from __future__ import annotations

from app import codec
from app.delivery import calls
from app.delivery.tags import Tag
from app.models import attempts
from spec.app.delivery.delivery_bench import JOB, WORKER, Bench, refused_failed_delivered
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


def attempt_stream(bench: Bench) -> list[dict[str, str]]:
    key = bench.keys.home("sub").attempt_stream
    return [
        {k.decode(): v.decode() for k, v in fields.items()}
        for _, fields in bench.client.xrange(key)
    ]


def test_every_attempt_is_appended_to_the_shard_stream_by_client_name(redis_client, keys, scripts):
    bench = Bench(redis_client, keys, scripts, max_backoff_ms=1)
    with refused_failed_delivered(bench, b"no"):
        pass
    found = attempt_stream(bench)
    assert [(a["status"], a["attempt"], a["batch"]) for a in found] == [
        ("connection_refused", "1", "1"), ("500", "2", "1"), ("200", "3", "1"),
    ]  # fmt: skip
    assert {a["subscriber"] for a in found} == {"Subscriber Service"}  # never the token
    assert all("sub" not in a.values() for a in found)
    own = [
        {k.decode(): v.decode() for k, v in fields.items()}
        for _, fields in redis_client.xrange(keys.attempts("sub"))
    ]
    assert [{k: v for k, v in a.items() if k != "subscriber"} for a in found] == own
    assert (found[-1]["events"], found[-1]["lane"], found[-1]["body"]) == ("2", "10", "no")


def test_the_stream_and_the_subscriber_log_are_switched_off_apart(redis_client, keys, scripts):
    off = Bench(redis_client, keys, scripts, attempt_stream_maxlen=0)
    with serving() as sub:
        off.subscribe(sub.url, ["orders"], max=1, timeout=0)
        off.publish(1)
        assert off.run().kind == "delivered"
        assert attempt_stream(off) == [] and redis_client.xlen(keys.attempts("sub")) == 1
        only = Bench(redis_client, keys, scripts, attempt_log=0, attempt_stream_maxlen=5)
        only.publish(1)
        assert only.run().kind == "delivered"
    assert [a["status"] for a in attempt_stream(only)] == ["200"]
    assert redis_client.xlen(keys.attempts("sub")) == 1  # the first bench's entry only


def test_an_attempt_cut_short_goes_to_the_stream_as_abandoned(redis_client, keys, scripts):
    bench = Bench(redis_client, keys, scripts)
    bench.client.hset(keys.tokens, "sub", "Subscriber Service")
    bench.subscribe("http://127.0.0.1:9/nobody", ["orders"], max=2, timeout=0)
    bench.publish(2)
    bench.take()
    begin = calls.begin(keys, "sub", WORKER, JOB, bench.clock(), "NONCE", "SALT")
    assert scripts.run(begin).tag is Tag.DELIVER
    bench.clock.advance(1500)
    kept = attempts.kept(bench.settings, bench.clock())
    assert bench.queue.scrub_many(WORKER.split("/")[0], [WORKER], kept=kept) == 1
    (cut,) = attempt_stream(bench)
    assert (cut["subscriber"], cut["status"], cut["batch"], cut["events"]) == (
        "Subscriber Service", "abandoned", "1", "2",
    )  # fmt: skip
