"""End to end with the Python client: `busbar web` and `busbar worker` as real processes,
a publisher and a subscriber using busbar_client, the subscriber receiving through the
WSGI receiver (Flask) behind a real HTTP server, and every delivery verified by the
Standard Webhooks reference implementation (`standardwebhooks`), during a rotation too.

On one Redis (`layout_free`): the client speaks the same HTTP to either layout;
what this adds is the client, the receiver and the rotation as a receiver sees them
(the bus's side of each on a Redis Cluster: test_delivery.py, test_matrix.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from busbar_client import Batch, Busbar, Conflict, NewEvent, NotFound, Route, WsgiReceiver
from flask import Flask
from standardwebhooks import Webhook, WebhookVerificationError

from spec.clients.servers import recording, wsgi_serving
from spec.conftest import ROOT_KEY
from spec.integration.bus import Bus, bus
from spec.integration.processes import wait_until

pytestmark = pytest.mark.layout_free


@dataclass
class Wire:
    """Every request as it arrived, before the receiver saw it: raw body and headers."""

    requests: list[tuple[bytes, dict[str, str]]] = field(default_factory=list)


@dataclass
class Inbox:
    """The user's function: keeps what it got; fails while `failing` is set."""

    batches: list[Batch] = field(default_factory=list)
    failing: bool = False

    def __call__(self, batch: Batch) -> None:
        if self.failing:
            raise RuntimeError("not today")
        self.batches.append(batch)

    @property
    def events(self) -> list:
        return [e for b in self.batches for e in b]


@contextmanager
def receiving(inbox: Inbox, secret: str | list[str], wire: Wire) -> Iterator[str]:
    app = Flask("billing")
    receiver = WsgiReceiver(inbox, secret=secret)
    app.add_url_rule("/busbar", view_func=receiver.flask_view, methods=["POST"])
    with wsgi_serving(recording(app, wire.requests)) as base:
        yield base + "/busbar"


TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def verify_all(wire: Wire, *secrets: str) -> None:
    """Each delivery verifies with each secret given, by the reference implementation."""
    assert wire.requests
    for body, headers in wire.requests:
        for secret in secrets:
            Webhook(secret).verify(body, headers)


def clients(b: Bus) -> tuple[Busbar, Busbar, Busbar, str]:
    """Root, a publisher `shop`, a subscriber `billing`, and billing's token."""
    root = Busbar(b.base, ROOT_KEY)
    shop = Busbar(b.base, root.create_token("shop").token)
    billing_token = root.create_token("billing").token
    return root, shop, Busbar(b.base, billing_token), billing_token


@pytest.mark.slow
def test_publish_subscribe_receive_and_verify_every_delivery(
    redis_url: str, redis_client, tmp_path: Path
):
    with bus(redis_url, tmp_path) as b:
        root, shop, billing, billing_token = clients(b)
        wire, inbox = Wire(), Inbox()
        # the callback is needed to subscribe, the secret exists once subscribed
        billing.subscribe("http://127.0.0.1:1/later", ["orders"])
        first = billing.secret()
        with receiving(inbox, first.secret, wire) as callback:
            routes = [Route("orders", priority=1, types=("create", "update")), "parcels"]
            billing.subscribe(callback, routes, timeout=50, max_events=20, event_ids=True)
            shop.publish("orders", NewEvent("create", "https://shop.test/orders/1", {"n": 1}),
                         traceparent=TRACEPARENT, tracestate="shop=1")  # fmt: skip
            shop.publish(
                "orders", [NewEvent("update", f"https://shop.test/orders/{i}") for i in range(5)]
            )
            wait_until(lambda: len(inbox.events) == 6, what="six events")
            verify_all(wire, first.secret)

            # a rotation: both secrets sign during the grace, so this receiver, which
            # still has the old one, keeps working, and the new one verifies too
            rotated = billing.rotate_secret()
            assert rotated.secret != first.secret and rotated.previous_until
            wire.requests.clear()
            shop.publish("orders", NewEvent("delete", "https://shop.test/orders/1"))  # no route
            shop.publish("orders", NewEvent("update", "https://shop.test/orders/9"))
            wait_until(lambda: len(inbox.events) == 7, what="the seventh event")
            verify_all(wire, first.secret, rotated.secret)

            # a tampered body fails verification
            body, headers = wire.requests[-1]
            with pytest.raises(WebhookVerificationError):
                Webhook(rotated.secret).verify(body.replace(b"update", b"create"), headers)

        events = inbox.events
        assert [e.type for e in events] == ["create"] + ["update"] * 6
        assert len({e.id for e in events}) == 7 and all(e.id for e in events)
        assert {e.topic for e in events} == {"orders"}
        assert events[0].data == {"n": 1}
        assert (events[0].traceparent, events[0].tracestate) == (TRACEPARENT, "shop=1")
        assert all(e.traceparent is None for e in events[1:])  # only the one it was sent with
        assert inbox.batches[0].traceparent == TRACEPARENT  # the batch's header: continue it

        # the 7th is in the inbox once the receiver answered; its ack may be a moment after
        wait_until(lambda: billing.subscriptions()[0].sent == 7, what="the last ack counted")
        (listed,) = billing.subscriptions()
        assert listed.name == "billing" and listed.subscriber == billing_token
        assert listed.event_ids and listed.sent == 7 and listed.topics == ["orders", "parcels"]
        assert (listed.circuit.state, listed.circuit.failures_in_a_row) == ("closed", 0)
        (topic,) = [t for t in shop.topics() if t.name == "orders"]
        assert (topic.publisher_name, topic.events) == ("shop", 8)

        # root rotates by client name and never sees the secret
        root.rotate_secret_of("billing")
        assert billing.secret().secret not in (first.secret, rotated.secret)

        # root marks an operator, who may then subscribe to the bus's own topic
        noc = root.create_token("noc", "noc-1", operator=True)
        assert noc.operator and {t.token: t.operator for t in root.tokens()}["noc-1"]
        Busbar(b.base, "noc-1").subscribe("http://127.0.0.1:1/ops", ["busbar_operations"])
        assert not root.create_token("noc", "noc-1", operator=False).operator
    for log in tmp_path.glob("*.log"):
        text = log.read_text()
        for secret in (first.secret, rotated.secret):
            assert secret not in text and secret[6:30] not in text
        assert billing_token not in text


@pytest.mark.slow
def test_dead_letters_replayed_through_the_client_keep_their_ids(
    redis_url: str, redis_client, tmp_path: Path
):
    with bus(redis_url, tmp_path) as b:
        root, shop, billing, _ = clients(b)
        wire, inbox = Wire(), Inbox(failing=True)
        billing.subscribe("http://127.0.0.1:1/later", ["orders"])
        with receiving(inbox, billing.secret().secret, wire) as callback:
            billing.subscribe(callback, ["orders"], timeout=0, max_attempts=1, event_ids=True)
            shop.publish("orders", [NewEvent("create", f"https://shop.test/{i}") for i in (1, 2)])
            wait_until(lambda: len(billing.deadletters()) == 2, what="two dead letters")
            dead = billing.deadletters()
            assert [d.last_status for d in dead] == ["500", "500"]
            assert [d.event.url for d in root.deadletters("billing")] == [
                "https://shop.test/1",
                "https://shop.test/2",
            ]
            inbox.failing = False
            assert billing.replay_deadletters() == 2
            wait_until(lambda: len(inbox.events) == 2, what="the replayed events")
            billing.purge_deadletters()
        failed_ids = [e["id"] for e in json.loads(wire.requests[0][0])]
        assert [e.id for e in inbox.events] == failed_ids
        assert wire.requests[0][1]["webhook-id"] != wire.requests[-1][1]["webhook-id"]
        with pytest.raises(NotFound):
            root.deadletters("nobody")
        with pytest.raises(Conflict) as err:  # a name is one client's
            root.create_token("billing", "billing-2")
        assert "a client named billing exists" in err.value.message
        assert root.create_token("billing", "billing-2", add=True).name == "billing"
        second = Busbar(b.base, "billing-2")
        second.subscribe(callback, ["orders"], max_attempts=3)  # the same subscription
        assert [(s.name, s.max_attempts) for s in root.subscriptions()] == [("billing", 3)]
        assert [s.subscriber for s in second.subscriptions()] == ["billing-2"]
        root.rotate_secret_of("billing")  # one subscriber of that name
        assert billing.secret().secret == second.secret().secret


@pytest.mark.slow
def test_ordering_keys_through_the_client(redis_url: str, redis_client, tmp_path: Path):
    """A partitioned subscription signs with its subscriber's secret like any other, and
    an explicit key reaches the receiver as given, in its key's order."""
    with bus(redis_url, tmp_path) as b:
        _, shop, billing, _ = clients(b)
        wire, inbox = Wire(), Inbox()
        billing.subscribe("http://127.0.0.1:1/later", ["orders"])
        secret = billing.secret().secret
        with receiving(inbox, secret, wire) as callback:
            billing.subscribe(callback, ["orders"], timeout=0, max_events=2, concurrency=4)
            sent = [NewEvent("update", f"https://shop.test/o/{i}", {"i": i}, key=f"cart-{i % 3}")
                    for i in range(12)]  # fmt: skip
            shop.publish("orders", sent)
            wait_until(lambda: len(inbox.events) == 12, what="twelve events")
            verify_all(wire, secret)
            # the inbox has the last batches before the worker has their answers
            in_flight = lambda: billing.subscriptions()[0].in_flight  # noqa: E731
            wait_until(lambda: in_flight() == 0, 30, "the last answers taken")
        for cart in range(3):
            mine = [e.data["i"] for e in inbox.events if e.key == f"cart-{cart}"]
            assert mine == [i for i in range(12) if i % 3 == cart]
        (listed,) = billing.subscriptions()
        assert (listed.concurrency, listed.draining, listed.in_flight) == (4, None, 0)


def test_root_iterates_every_subscription_a_page_at_a_time(
    redis_url: str, redis_client, tmp_path: Path
):
    with bus(redis_url, tmp_path) as b:
        names = ["kilo", "hotel", "juliet", "india", "golf"]
        for name in names:
            b.subscribe(b.client(name), "http://127.0.0.1:1/later", ["orders"])
        root = Busbar(b.base, ROOT_KEY)
        pages = root.iter_subscriptions(page=2)
        assert next(pages).name == "golf"  # the first page only, so far
        assert [s.name for s in pages] == ["hotel", "india", "juliet", "kilo"]
        assert [s.name for s in root.subscriptions()] == sorted(names)
