"""A subscription's headers on a real server: secrets sealed before Redis holds them,
kept across a change that does not give them, opened by the worker's HeaderBook, and
sealed again under a new key by `busbar secrets reseal`'s service."""

from __future__ import annotations

import pytest

from app.errors import InvalidInput
from app.lua import Scripts
from app.models import subscriber_calls as calls
from app.models.keys import Keys
from app.models.sealed import Sealer, Unsealable
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.services.sealed_headers import HeaderBook, reseal, to_store

SECRET = "key-only-the-subscriber-knows-42"
OLD, NEW = b"o" * 32, b"n" * 32


def subscribe(store: SubscriberStore, sealer: Sealer, headers: object, now: int) -> None:
    body = {"topics": ["orders"], "callback": "https://s.test/hook"}
    sub = parse_subscription(
        body if headers is None else {**body, "headers": headers}, allow_http=False
    )
    store.subscribe(
        "tok", sub, now, to_store(sub.headers, store.headers("tok"), sealer, "tok", now)
    )


@pytest.fixture
def store(redis_client, keys: Keys, scripts: Scripts) -> SubscriberStore:
    return SubscriberStore(redis_client, keys, scripts)


def test_secrets_are_sealed_kept_and_opened_and_never_listed(store: SubscriberStore, redis_client):
    sealer = Sealer(NEW)
    subscribe(
        store, sealer, {"X-Tenant": "acme", "X-Api-Key": {"value": SECRET, "secret": True}}, 5
    )
    raw = store.headers("tok")
    assert raw and SECRET.encode() not in raw
    assert all(
        SECRET.encode() not in v
        for v in redis_client.hgetall(store._keys.subscriber("tok")).values()
    )
    book = HeaderBook(sealer)
    assert book.of("tok", raw) == {"X-Tenant": "acme", "X-Api-Key": SECRET}
    (listed,) = store.describe(["tok"])
    assert listed.describe()["headers"] == {
        "X-Tenant": "acme",
        "X-Api-Key": {"secret": True, "set_at": 5},
    }

    subscribe(store, sealer, None, 9)  # a change without `headers` keeps them
    assert store.headers("tok") == raw
    subscribe(store, sealer, {"X-Api-Key": {"secret": True}, "X-Env": "prod"}, 11)  # kept by name
    assert HeaderBook(sealer).of("tok", store.headers("tok")) == {
        "X-Api-Key": SECRET,
        "X-Env": "prod",
    }
    (listed,) = store.describe(["tok"])
    assert listed.describe()["headers"]["X-Api-Key"] == {"secret": True, "set_at": 5}  # not re-set

    with pytest.raises(InvalidInput, match=r"headers\.X-Other: no secret is stored"):
        subscribe(store, sealer, {"X-Other": {"secret": True}}, 12)
    subscribe(store, sealer, {}, 13)
    assert store.headers("tok") is None
    assert HeaderBook(sealer).of("tok", b"") == {}


def test_a_new_key_opens_nothing_until_the_former_is_given_then_reseal_moves_them(
    store: SubscriberStore, redis_client, keys: Keys, scripts: Scripts
):  # fmt: skip
    subscribe(store, Sealer(OLD), {"X-Api-Key": {"value": SECRET, "secret": True}}, 5)
    raw = store.headers("tok")
    with pytest.raises(Unsealable, match="BUSBAR_SECRET_KEY_PREVIOUS"):
        HeaderBook(Sealer(NEW)).of("tok", raw)
    rotating = Sealer(NEW, [OLD])
    assert HeaderBook(rotating).of("tok", raw) == {"X-Api-Key": SECRET}
    assert reseal(redis_client, keys, scripts, rotating, ["tok", "nobody"]) == (1, 1)
    assert HeaderBook(Sealer(NEW)).of("tok", store.headers("tok")) == {"X-Api-Key": SECRET}
    assert reseal(redis_client, keys, scripts, rotating, ["tok"]) == (0, 0)  # done already


def test_reseal_never_undoes_a_change_that_lands_between_its_read_and_its_write(
    store: SubscriberStore, redis_client, keys: Keys, scripts: Scripts
):  # fmt: skip
    subscribe(store, Sealer(OLD), {"X-Api-Key": {"value": SECRET, "secret": True}}, 5)
    raw = store.headers("tok").decode()
    subscribe(store, Sealer(NEW), {"X-Api-Key": {"value": "a-newer-one", "secret": True}}, 6)
    assert not scripts.run(calls.swap(keys.subscriber("tok"), "headers", raw, "[]"))  # read before
    assert HeaderBook(Sealer(NEW)).of("tok", store.headers("tok")) == {"X-Api-Key": "a-newer-one"}


def test_reseal_moves_a_client_certificates_key_to_the_new_key_too(
    store: SubscriberStore, redis_client, keys: Keys, scripts: Scripts
):  # fmt: skip
    from app.delivery.callback import tls_context
    from app.delivery.identities import CertBook
    from app.models.client_cert import ClientCert
    from spec.app.models.test_client_cert import pair

    cert, key = pair()
    sealed = ClientCert(cert, key).stored(Sealer(OLD), "tok", 5)
    sub = parse_subscription(
        {"topics": ["orders"], "callback": "https://s.test/"}, allow_http=False
    )
    store.subscribe("tok", sub, 5, "", sealed)
    raw = redis_client.hget(keys.subscriber("tok"), "client_cert")
    with pytest.raises(Unsealable):
        CertBook(lambda: tls_context(True), lambda: Sealer(NEW)).of("tok", raw)
    assert reseal(redis_client, keys, scripts, Sealer(NEW, [OLD]), ["tok"]) == (1, 1)
    raw = redis_client.hget(keys.subscriber("tok"), "client_cert")
    identity = CertBook(lambda: tls_context(True), lambda: Sealer(NEW)).of("tok", raw)
    assert identity is not None and len(identity.name) == 64


def test_reseal_moves_an_oauth2_secret_to_the_new_key_too(
    store: SubscriberStore, redis_client, keys: Keys, scripts: Scripts
):  # fmt: skip
    import json

    from app.models.oauth2 import where

    body = {"topics": ["orders"], "callback": "https://s.test/",
            "auth": {"type": "oauth2", "token_url": "https://idp.test/token",
                     "client_id": "billing", "client_secret": "cs-9f2e"}}  # fmt: skip
    sub = parse_subscription(body, allow_http=False)
    assert sub.auth is not None
    store.subscribe("tok", sub, 5, auth=sub.auth.stored(None, Sealer(OLD), "tok", 5))
    assert reseal(redis_client, keys, scripts, Sealer(NEW, [OLD]), ["tok"]) == (1, 1)
    stored = json.loads(redis_client.hget(keys.subscriber("tok"), "auth"))
    assert Sealer(NEW).open(stored["secret"], where("tok")) == "cs-9f2e"
    assert reseal(redis_client, keys, scripts, Sealer(NEW, [OLD]), ["tok"]) == (0, 0)


def test_reseal_moves_a_destinations_password_to_the_new_key_too(
    store: SubscriberStore, redis_client, keys: Keys, scripts: Scripts
):  # fmt: skip
    from app.models.destination import opened

    body = {"topics": ["orders"],
            "destination": {"type": "nats", "url": "tls://nats.example.com",
                            "subject": "orders", "user": "busbar", "password": SECRET}}  # fmt: skip
    sub = parse_subscription(body, allow_http=False)
    assert sub.destination is not None
    sealed = sub.destination.stored(Sealer(OLD), "tok", 5)
    store.subscribe("tok", sub, 5, destination=sealed)
    with pytest.raises(Unsealable):
        opened(redis_client.hget(keys.subscriber("tok"), "destination"), Sealer(NEW), "tok")
    assert reseal(redis_client, keys, scripts, Sealer(NEW, [OLD]), ["tok"]) == (1, 1)
    raw = redis_client.hget(keys.subscriber("tok"), "destination")
    assert opened(raw, Sealer(NEW), "tok").password == SECRET and SECRET.encode() not in raw
    assert reseal(redis_client, keys, scripts, Sealer(NEW, [OLD]), ["tok"]) == (0, 0)
