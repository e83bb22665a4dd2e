"""The SQS publisher (app/delivery/sqs_publisher.py) against a real SQS API, moto's
server: a batch is confirmed only when the queue holds every message, in order, each
once on a FIFO queue (a batch sent again is dropped by its deduplication ids), with a
key's events in one message group; more than ten events go in several calls; a queue
that does not exist, refused credentials, a refused address and an API that is down are
failed attempts whose reason and note name no secret, and the API back takes the rest."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from app import codec
from app.delivery.broker_messages import Message, messages
from app.delivery.callback import tls_context
from app.delivery.dialer import Dialer
from app.delivery.flight import Flight
from app.delivery.sqs_publisher import NO_QUEUE, SqsPublisher, calls, group_of
from app.models.attempt_result import AUTH_FAILED, CONFIRMED, REFUSED_ADDRESS
from app.models.callback_policy import LOOPBACK_OPEN, PRODUCTION, Policy
from app.models.destination import Destination
from app.models.trace_context import TraceContext
from spec.sqs_server import REGION, SqsServer, sqs_server
from spec.tcp_forwarder import forwarder

pytestmark = pytest.mark.slow
TRACE = TraceContext("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "v=1")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with sqs_server(tmp_path_factory.mktemp("sqs")) as made:
        yield made


def publisher(policy: Policy = LOOPBACK_OPEN) -> SqsPublisher:
    tls = tls_context(True)
    return SqsPublisher(Dialer(policy, tls, 2.0), lambda: tls, timeout=3.0, connect_timeout=2.0)


def batch(n: int, key: str = "k1", start: int = 0, trace: TraceContext | None = None,
          data: Any = None) -> list[Message]:  # fmt: skip
    entries = [
        b"0|" + codec.pack_event("orders", "created", f"https://o.test/{i}", i,
                                 {"n": i} if data is None else data, key=key, trace=trace)
        for i in range(start, start + n)
    ]  # fmt: skip
    flight = Flight("tok", "w", b"J", b"B", "N", 0.0, "sqs://x", "u", "c", entries)
    return messages(flight, destination(server_url="http://x/1/q.fifo"))


def destination(server_url: str, key: tuple[str, str] = ("", ""), **more: Any) -> Destination:
    more.setdefault("region", REGION)
    return Destination("sqs", server_url, "{key}", user=key[0] or None,
                       password=key[1] or None, **more)  # fmt: skip


def to(server: SqsServer, queue: str, **more: Any) -> Destination:
    return destination(queue, server.key, **more)


def bodies(held: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(m["Body"]) for m in held]


def test_a_fifo_batch_is_confirmed_in_order_once_in_its_keys_group(server: SqsServer):
    queue = server.queue("orders-once.fifo")

    async def work() -> None:
        p = publisher()
        sent = batch(13) + batch(2, key="k2", start=13, trace=TRACE)
        first = await p.publish(to(server, queue), sent)
        assert first.result == CONFIRMED and first.note == "15 sent"
        again = await p.publish(to(server, queue), sent)  # a lost answer: sent again
        assert again.result.ok
        await p.close()

    asyncio.run(work())
    held = server.received(queue)
    assert [m["url"] for m in bodies(held)] == [f"https://o.test/{i}" for i in range(15)]
    assert [m["Attributes"]["MessageDeduplicationId"] for m in held] == [
        b["id"] for b in bodies(held)
    ]
    assert {m["Attributes"]["MessageGroupId"] for m in held[:13]} == {"k1"}
    assert held[13]["Attributes"]["MessageGroupId"] == "k2"
    assert bodies(held)[0]["data"] == {"n": 0} and bodies(held)[0]["key"] == "k1"
    assert "MessageAttributes" not in held[0]
    last = held[-1]["MessageAttributes"]
    assert (last["traceparent"]["StringValue"], last["tracestate"]["StringValue"]) == TRACE


def test_a_standard_queue_takes_the_batch_without_groups(server: SqsServer):
    queue = server.queue("orders-standard")

    async def work() -> None:
        p = publisher()
        assert (await p.publish(to(server, queue), batch(4))).result.ok
        await p.close()

    asyncio.run(work())
    held = server.received(queue)
    assert sorted(m["url"] for m in bodies(held)) == [f"https://o.test/{i}" for i in range(4)]
    assert not any("MessageGroupId" in m["Attributes"] for m in held)


def test_calls_hold_ten_entries_and_a_quarter_mebibyte_at_most():
    small, big = batch(25), batch(3, data="x" * 100_000)
    assert [len(c) for c in calls(small)] == [10, 10, 5]
    assert [len(c) for c in calls(big)] == [2, 1]
    assert [m for c in calls(small) for m in c] == small
    long = "k" * 300
    assert len(group_of(long)) == 128 and group_of(long) != group_of(long[:-1] + "j")
    assert group_of("k1") == "k1"


def test_a_queue_that_does_not_exist_and_refused_credentials_fail_naming_no_secret(
    server: SqsServer, caplog: pytest.LogCaptureFixture
):
    queue = server.queue("orders-refusals.fifo")
    caplog.set_level(logging.DEBUG)

    async def work() -> None:
        p = publisher()
        absent = to(server, queue.replace("refusals", "absent"))
        gone = await p.publish(absent, batch(2))
        assert gone.result.text == NO_QUEUE and gone.note == f"0 of 2 sent; then {NO_QUEUE}"
        assert (await p.probe(absent)).result.text == NO_QUEUE
        wrong = destination(queue, (server.key[0], "not-the-secret-key"))
        refused = await p.publish(wrong, batch(2))
        assert refused.result.text == AUTH_FAILED
        unknown = destination(queue, ("AKIAUNKNOWN000000000", "not-the-secret-key"))
        assert (await p.publish(unknown, batch(1))).result.text == AUTH_FAILED
        assert (await p.probe(to(server, queue))).result == CONFIRMED
        await p.close()

    asyncio.run(work())
    assert server.received(queue) == []
    assert "not-the-secret-key" not in caplog.text and server.key[1] not in caplog.text


def test_a_refused_address_is_never_connected_to(server: SqsServer):
    queue = server.queue("orders-policy.fifo")

    async def work() -> None:
        p = publisher(PRODUCTION)  # loopback refused
        refused = await p.publish(to(server, queue), batch(1))
        assert refused.result.text == REFUSED_ADDRESS
        by_name = to(server, queue, endpoint=f"http://localhost:{server.port}")
        assert (await p.publish(by_name, batch(1))).result.text == REFUSED_ADDRESS
        await p.close()

    asyncio.run(work())
    assert server.received(queue) == []


def test_an_api_that_is_down_fails_the_attempt_and_once_back_takes_the_rest(server: SqsServer):
    queue = server.queue("orders-outage.fifo")
    with forwarder(("127.0.0.1", server.port)) as gate:

        async def work() -> None:
            p = publisher()
            through = to(server, queue, endpoint=gate.url)
            assert (await p.publish(through, batch(3))).result.ok
            gate.cut()
            loop = asyncio.get_running_loop()
            began = loop.time()
            down = await p.publish(through, batch(3, start=3))
            assert not down.result.ok and down.result.outcome in ("connection", "timeout")
            assert loop.time() - began < 3.5  # within BUSBAR_TIMEOUT, never hung
            gate.mend()
            back = await p.publish(through, batch(3, start=3))
            assert back.result.ok, back.note
            await p.close()

        asyncio.run(work())
    held = server.received(queue)
    assert [m["url"] for m in bodies(held)] == [f"https://o.test/{i}" for i in range(6)]


def test_botocores_own_failures_are_named_as_a_callbacks_are():
    """botocore wraps what the connection met in errors of its own: the attempt log
    names them with the callbacks' words, never a class name."""
    from botocore.exceptions import (
        ConnectionClosedError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    from app.delivery.sqs_publisher import _reason

    url = "http://127.0.0.1:1"
    assert _reason(ConnectionClosedError(endpoint_url=url)) == "connection_error"
    assert _reason(ReadTimeoutError(endpoint_url=url)) == "timeout"
    try:
        try:
            raise ConnectionRefusedError(111, "refused")
        except ConnectionRefusedError as refused:
            raise EndpointConnectionError(endpoint_url=url) from refused
    except EndpointConnectionError as wrapped:
        assert _reason(wrapped) == "connection_refused"


def test_a_proxy_in_the_environment_is_not_used(server: SqsServer, monkeypatch: pytest.MonkeyPatch):
    """As for callbacks: the worker connects to the addresses the policy judged, never
    through a proxy the environment names (which would resolve the name itself)."""
    queue = server.queue("orders-proxy.fifo")

    async def work() -> None:
        p = publisher()
        sent = await p.publish(to(server, queue), batch(2))
        assert sent.result.ok, sent.note
        await p.close()

    with monkeypatch.context() as env:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            env.setenv(name, "http://127.0.0.1:9")  # nothing listens there
        env.delenv("NO_PROXY", raising=False)
        env.delenv("no_proxy", raising=False)
        asyncio.run(work())
    assert len(server.received(queue)) == 2  # boto3 here, without the proxy
