"""Signed deliveries, checked by the Standard Webhooks reference implementation
(`standardwebhooks` from PyPI), never by busbar's own signing code: real Redis, real
HTTP subscriber, the delivery service as a worker thread runs it."""

from __future__ import annotations

import time

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from app import codec
from app.models.event import Event
from app.models.secrets import SecretStore
from app.models.subscription import parse_subscription
from spec.app.delivery.delivery_bench import Bench
from spec.conftest import ROOT_KEY
from spec.integration.subscriber import Received, Subscriber, serving


@pytest.fixture
def bench(redis_client, keys, scripts) -> Bench:
    return Bench(redis_client, keys, scripts, max_backoff_ms=1)


def secrets(bench: Bench) -> SecretStore:
    return SecretStore(bench.keys, bench.scripts, ROOT_KEY.encode())


def verify(secret: str, request: Received) -> list:
    return Webhook(secret).verify(request.raw, request.headers)


def failing_then_ok(failures: int) -> Subscriber:
    answers = iter([500] * failures)
    return Subscriber(responder=lambda _: (next(answers, 200), 0.0))


def test_every_delivery_is_signed_with_the_subscribers_secret(bench: Bench):
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], max=2, timeout=0, uuid="the-uuid")
        bench.publish(3)
        assert bench.run().kind == "delivered"
        assert bench.run().kind == "delivered"
    secret = secrets(bench).get("sub", bench.clock()).secret
    assert secret.startswith("whsec_")
    for request in sub.received:
        assert verify(secret, request) == request.events
        assert request.user == "the-uuid"  # Routemaster's Basic user is still sent
        assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 5
    ids = [r.headers["webhook-id"] for r in sub.received]
    assert len(set(ids)) == 2 and all(i.startswith("msg_") for i in ids)


def test_a_tampered_body_or_another_secret_fails_verification(bench: Bench):
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], timeout=0)
        bench.publish(1)
        assert bench.run().kind == "delivered"
    (request,) = sub.received
    secret = secrets(bench).get("sub", bench.clock()).secret
    tampered = request.raw.replace(b"https://o.test/0", b"https://o.test/1")
    assert tampered != request.raw
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(tampered, request.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + "A" * 43 + "=").verify(request.raw, request.headers)


def test_a_retry_keeps_its_webhook_id_and_is_signed_at_its_own_time(bench: Bench):
    with serving(failing_then_ok(1)) as sub:
        bench.subscribe(sub.url, ["orders"], timeout=0)
        bench.publish(2)
        assert bench.run().kind == "failed"
        bench.clock.advance(1050)  # a new second: the retry's timestamp differs
        assert bench.run().kind == "delivered"
    first, retry = sub.received
    assert first.raw == retry.raw
    assert first.headers["webhook-id"] == retry.headers["webhook-id"]
    assert first.headers["webhook-timestamp"] != retry.headers["webhook-timestamp"]
    secret = secrets(bench).get("sub", bench.clock()).secret
    assert verify(secret, first) == verify(secret, retry)


def test_a_batch_changed_by_coalescing_before_its_retry_is_a_new_message(bench: Bench):
    """A receiver that handled the first attempt and drops its webhook-id must not drop
    the newer state a coalescing route put in its place."""
    with serving(failing_then_ok(1)) as sub:
        bench.subscribe(sub.url, [{"topic": "orders", "coalesce": True}], max=10, timeout=0)
        now = bench.clock()
        bench.ingest.publish("orders", "pub", [Event("update", "https://o.test/a", now, {})], now)
        assert bench.run().kind == "failed"
        bench.ingest.publish("orders", "pub", [Event("update", "https://o.test/a", now + 1, {})])
        bench.clock.advance(10)
        assert bench.run().kind == "delivered"
    first, retry = sub.received
    assert [e["t"] for e in retry.events] == [now + 1]
    assert first.headers["webhook-id"] != retry.headers["webhook-id"]


def test_during_a_rotation_both_secrets_sign_and_after_the_grace_only_the_new(bench: Bench):
    store = secrets(bench)
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], timeout=0)
        old = store.get("sub", bench.clock()).secret
        rotated = store.rotate("sub", bench.clock(), grace_s=60)
        assert rotated.secret != old
        assert rotated.previous_until is not None
        assert rotated.previous_until == pytest.approx(bench.clock() + 60_000, abs=2000)
        bench.publish(1)
        assert bench.run().kind == "delivered"
        during = sub.received[-1]
        assert len(during.headers["webhook-signature"].split(" ")) == 2
        assert verify(old, during) == verify(rotated.secret, during) == during.events
        # the grace is over: only the new secret signs
        bench.client.hset(bench.keys.subscriber("sub"), "previous_until", bench.clock() - 1)
        assert store.get("sub", bench.clock()).previous_until is None
        bench.publish(1, start=1)
        assert bench.run().kind == "delivered"
        after = sub.received[-1]
    assert len(after.headers["webhook-signature"].split(" ")) == 1
    assert verify(rotated.secret, after) == after.events
    with pytest.raises(WebhookVerificationError):
        verify(old, after)


def test_a_rotation_without_grace_drops_the_old_secret_at_once(bench: Bench):
    store = secrets(bench)
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], timeout=0)
        old = store.get("sub", bench.clock()).secret
        new = store.rotate("sub", bench.clock(), grace_s=0)
        assert new.previous_until is None
        bench.publish(1)
        assert bench.run().kind == "delivered"
    (request,) = sub.received
    assert verify(new.secret, request) == request.events
    with pytest.raises(WebhookVerificationError):
        verify(old, request)


def test_the_secret_outlives_resubscribing_and_not_unsubscribing(bench: Bench):
    store = secrets(bench)
    bench.subscribe("https://s.test/in", ["orders"])
    first = store.get("sub", bench.clock()).secret
    bench.subscribe("https://s.test/other", ["orders", "users"], max=5)
    assert store.get("sub", bench.clock()).secret == first
    bench.store.delete("sub")
    bench.subscribe("https://s.test/in", ["orders"])
    assert store.get("sub", bench.clock()).secret != first


def test_neither_redis_nor_the_delivery_log_holds_a_secret(bench: Bench):
    """A copy of Redis alone must not give the secrets away: only salts are stored."""
    store = secrets(bench)
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], timeout=0)
        old = store.get("sub", bench.clock()).secret
        new = store.rotate("sub", bench.clock(), grace_s=60).secret
        bench.publish(1)
        assert bench.run().kind == "delivered"
    assert sub.received
    dump = b""
    for key in bench.client.scan_iter():
        dump += key + bench.client.dump(key)
        kind = bench.client.type(key)
        if kind == b"hash":
            dump += b"".join(k + v for k, v in bench.client.hgetall(key).items())
        elif kind == b"stream":
            for _, fields in bench.client.xrange(key):
                dump += b"".join(k + v for k, v in fields.items())
    assert b"deliveries" in dump and b"secret_salt" in dump
    for secret in (old, new):
        assert secret.encode() not in dump
        assert secret.removeprefix("whsec_").encode() not in dump


def test_a_subscriber_from_before_secrets_gets_one_at_its_next_delivery(bench: Bench):
    with serving() as sub:
        bench.subscribe(sub.url, ["orders"], timeout=0)
        bench.client.hdel(bench.keys.subscriber("sub"), "secret_salt")
        bench.publish(1)
        assert bench.run().kind == "delivered"
    (request,) = sub.received
    assert verify(secrets(bench).get("sub", bench.clock()).secret, request) == request.events


def test_two_subscribers_never_share_a_webhook_id(bench: Bench):
    """Same callback, batch id, creation time and body: still two messages, one each."""
    with serving() as sub:
        for token in ("sub", "sub2"):
            body = {"topics": ["orders"], "callback": sub.url, "timeout": 0}
            bench.store.subscribe(
                token, parse_subscription(body, allow_http=True, policy=bench.policy), bench.clock()
            )
        bench.publish(1)
        for token in ("sub", "sub2"):
            job = codec.pack_job("batch", [token])
            bench.client.lpush(bench.keys.home(token).jobs_pending("main", "w/0"), job)
            assert bench.delivery.run(token, "w/0", job).kind == "delivered"
    first, second = sub.received
    assert first.raw == second.raw
    assert first.headers["webhook-id"] != second.headers["webhook-id"]
