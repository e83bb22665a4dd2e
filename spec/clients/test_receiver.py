"""The receivers behind real HTTP servers (Werkzeug for WSGI and Flask, uvicorn for ASGI
and Starlette), fed requests signed by the Standard Webhooks reference implementation."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest
import requests
from busbar_client import AsgiReceiver, Batch, Event, WsgiReceiver
from flask import Flask
from standardwebhooks import Webhook
from starlette.applications import Starlette
from starlette.routing import Route

from spec.clients.servers import asgi_serving, wsgi_serving

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
OTHER = "whsec_" + base64.b64encode(os.urandom(32)).decode()
EVENTS = [
    {"topic": "orders", "type": "create", "url": "https://o.test/1", "t": 1, "data": {"a": 1}},
    {"topic": "orders", "type": "update", "url": "https://o.test/1", "t": 2, "id": "evt_x"},
]


def signed(
    body: bytes, msg_id: str = "msg_1", secret: str = SECRET, at: float | None = None
) -> dict[str, str]:
    stamp = int(time.time() if at is None else at)
    when = datetime.fromtimestamp(stamp, tz=UTC)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": Webhook(secret).sign(msg_id, when, body.decode()),
        "Content-Type": "application/json",
    }


class Calls:
    """What the handler saw; `fail` makes it raise that many times first."""

    def __init__(self, fail: int = 0, delay: float = 0.0) -> None:
        self.batches: list[Batch] = []
        self.fail, self.delay = fail, delay
        self.handling = threading.Event()  # set once a call has begun

    def __call__(self, batch: Batch) -> None:
        self.handling.set()
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            self.fail -= 1
            raise RuntimeError("the handler failed")
        self.batches.append(batch)


def flask_app(receiver: WsgiReceiver) -> Flask:
    app = Flask("receiver")
    app.add_url_rule("/busbar", view_func=receiver.flask_view, methods=["POST"])
    return app


@contextmanager
def wsgi(receiver: WsgiReceiver) -> Iterator[str]:
    with wsgi_serving(receiver) as base:
        yield base + "/"


@contextmanager
def flask(receiver: WsgiReceiver) -> Iterator[str]:
    with wsgi_serving(flask_app(receiver)) as base:
        yield base + "/busbar"


@contextmanager
def asgi(receiver: AsgiReceiver) -> Iterator[str]:
    with asgi_serving(receiver) as base:
        yield base + "/"


@contextmanager
def starlette(receiver: AsgiReceiver) -> Iterator[str]:
    with asgi_serving(Starlette(routes=[Route("/busbar", receiver, methods=["POST"])])) as base:
        yield base + "/busbar"


SERVERS: list[tuple[type, Callable]] = [
    (WsgiReceiver, wsgi), (WsgiReceiver, flask), (AsgiReceiver, asgi), (AsgiReceiver, starlette)
]  # fmt: skip


@pytest.fixture(params=SERVERS, ids=["wsgi", "flask", "asgi", "starlette"])
def serve(request) -> Callable:
    kind, serving = request.param

    @contextmanager
    def serve_(handler: Callable, **config) -> Iterator[str]:
        with serving(kind(handler, **config)) as url:
            yield url

    return serve_


def post(url: str, body: bytes, headers: dict[str, str]) -> requests.Response:
    return requests.post(url, data=body, headers=headers, timeout=10)


def test_a_signed_batch_reaches_the_handler_as_typed_events(serve):
    calls = Calls()
    body = json.dumps(EVENTS).encode()
    with serve(calls, secret=SECRET) as url:
        response = post(url, body, signed(body, "msg_a"))
    assert response.status_code == 204
    (batch,) = calls.batches
    assert batch.webhook_id == "msg_a" and len(batch) == 2
    assert list(batch) == [
        Event("orders", "create", "https://o.test/1", 1, {"a": 1}, None),
        Event("orders", "update", "https://o.test/1", 2, None, "evt_x"),
    ]


def test_forged_stale_or_unsigned_requests_never_reach_the_handler(serve):
    calls = Calls()
    body = json.dumps(EVENTS).encode()
    tampered = body.replace(b'"a": 1', b'"a": 2')
    with serve(calls, secret=SECRET, tolerance=60) as url:
        cases = {
            "tampered": post(url, tampered, signed(body)),
            "other secret": post(url, body, signed(body, secret=OTHER)),
            "stale": post(url, body, signed(body, at=time.time() - 120)),
            "future": post(url, body, signed(body, at=time.time() + 120)),
            "unsigned": post(url, body, {"Content-Type": "application/json"}),
        }
    assert {name: r.status_code for name, r in cases.items()} == dict.fromkeys(cases, 401)
    assert "no signature matches" in cases["tampered"].json()["error"]
    assert calls.batches == []


def test_a_replayed_webhook_id_is_handled_once(serve):
    calls = Calls()
    body = json.dumps(EVENTS).encode()
    with serve(calls, secret=SECRET) as url:
        first = post(url, body, signed(body, "msg_r"))
        replay = post(url, body, signed(body, "msg_r"))  # a retry after a lost answer
        other = post(url, body, signed(body, "msg_s"))
    assert (first.status_code, replay.status_code, other.status_code) == (204, 200, 204)
    assert [b.webhook_id for b in calls.batches] == ["msg_r", "msg_s"]


def test_a_webhook_id_being_handled_is_refused_meanwhile(serve):
    calls = Calls(delay=1.0)
    body = json.dumps(EVENTS).encode()
    with serve(calls, secret=SECRET) as url:
        slow: list[requests.Response] = []
        thread = threading.Thread(target=lambda: slow.append(post(url, body, signed(body))))
        thread.start()
        # once the first is in its handler (a fixed 0.2 s was not always enough under
        # make test's load: the second arrived first)
        assert calls.handling.wait(10)
        meanwhile = post(url, body, signed(body))
        thread.join()
    assert (slow[0].status_code, meanwhile.status_code) == (204, 409)
    assert len(calls.batches) == 1


def test_no_2xx_until_the_handler_returned_and_a_failure_is_retried(serve):
    calls = Calls(fail=1)
    body = json.dumps(EVENTS).encode()
    with serve(calls, secret=SECRET) as url:
        failed = post(url, body, signed(body, "msg_f"))
        retried = post(url, body, signed(body, "msg_f"))
    assert (failed.status_code, retried.status_code) == (500, 204)
    assert len(calls.batches) == 1


def test_during_a_rotation_either_secret_verifies(serve):
    calls = Calls()
    body = json.dumps(EVENTS).encode()
    with serve(calls, secret=[OTHER, SECRET]) as url:
        assert post(url, body, signed(body, "m1", secret=SECRET)).status_code == 204
        assert post(url, body, signed(body, "m2", secret=OTHER)).status_code == 204
    assert len(calls.batches) == 2


def test_routemaster_style_basic_uuid(serve):
    calls = Calls()
    body = json.dumps(EVENTS[:1]).encode()
    with serve(calls, uuid="the-uuid") as url:
        good = requests.post(url, data=body, auth=("the-uuid", "x"), timeout=10)
        bad = requests.post(url, data=body, auth=("not-it", "x"), timeout=10)
        none = requests.post(url, data=body, timeout=10)
    assert (good.status_code, bad.status_code, none.status_code) == (204, 401, 401)
    assert len(calls.batches) == 1


def test_a_body_that_is_not_a_delivery_is_a_400(serve):
    calls = Calls()
    with serve(calls, secret=SECRET) as url:
        for body in (b'{"a": 1}', b"[1]", b'[{"topic": "x"}]', b"nope"):
            assert post(url, body, signed(body)).status_code == 400, body
    assert calls.batches == []


def test_an_async_handler_is_awaited():
    seen: list[Batch] = []

    async def handler(batch: Batch) -> None:
        await asyncio.sleep(0.01)
        seen.append(batch)

    body = json.dumps(EVENTS).encode()
    with asgi(AsgiReceiver(handler, secret=SECRET)) as url:
        assert post(url, body, signed(body)).status_code == 204
    assert len(seen) == 1


def test_a_receiver_needs_a_secret_or_a_uuid_and_a_sane_tolerance():
    with pytest.raises(ValueError, match="secret"):
        WsgiReceiver(Calls())
    with pytest.raises(ValueError, match="tolerance"):
        WsgiReceiver(Calls(), secret=SECRET, tolerance=3600)
