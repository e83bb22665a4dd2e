"""The NATS JetStream publisher (app/delivery/nats_publisher.py) against a real
nats-server with JetStream: a batch is confirmed only when the stream holds every
message, in order, each once (a batch sent again is not stored twice); a subject no
stream captures, another stream than the one named, a broker down or killed mid-run, a
refused password and a refused address are failed attempts with a reason that names no
secret, and the publisher opens a new connection once the broker is back."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from app import codec
from app.delivery.broker_messages import Message, messages
from app.delivery.callback import tls_context
from app.delivery.dialer import Dialer
from app.delivery.flight import Flight
from app.delivery.nats_publisher import NO_STREAM, PUBACK_WAIT_S, STREAM_MISMATCH, NatsPublisher
from app.models.attempt_result import AUTH_FAILED, CONFIRMED, REFUSED_ADDRESS
from app.models.callback_policy import LOOPBACK_OPEN, PRODUCTION, Policy
from app.models.destination import Destination
from app.models.trace_context import TraceContext
from spec.integration.processes import stop
from spec.nats_server import NatsServer, nats_server
from spec.tcp_forwarder import forwarder

SECRET = "s3cret-pass-word"


def publisher(policy: Policy = LOOPBACK_OPEN) -> NatsPublisher:
    tls = tls_context(True)
    return NatsPublisher(Dialer(policy, tls, 2.0), lambda: tls, timeout=3.0, connect_timeout=2.0)


TRACE = TraceContext("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "v=1")


def batch(
    n: int, key: str = "k1", start: int = 0, trace: TraceContext | None = None
) -> list[Message]:
    entries = [
        b"0|" + codec.pack_event("orders", "created", f"https://o.test/{i}", i, {"n": i},
                                 key=key, trace=trace)
        for i in range(start, start + n)
    ]  # fmt: skip
    flight = Flight("tok", "w", b"J", b"B", "N", 0.0, "nats://x", "u", "c", entries)
    return messages(flight, destination("nats://127.0.0.1:1"))


def destination(url: str, **more: Any) -> Destination:
    return Destination("nats", url, "orders.{type}.{key}", **more)


async def with_stream(server: NatsServer, name: str = "ORDERS", subjects: str = "orders.>") -> None:
    client = await nats.connect(server.url, user=server.auth[0] if server.auth else None,
                                password=server.auth[1] if server.auth else None)  # fmt: skip
    await client.jetstream().add_stream(name=name, subjects=[subjects])
    await client.close()


async def stored(server: NatsServer, stream: str = "ORDERS") -> list[dict[str, Any]]:
    """Every message the stream holds, in its order: the body, with its subject and id."""
    client = await nats.connect(server.url)
    js = client.jetstream()
    info = await js.stream_info(stream)
    found = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1) if info.state.messages else ():
        raw = await js.get_msg(stream, seq)
        found.append({**json.loads(raw.data or b"{}"), "subject": raw.subject,
                      "msg_id": (raw.headers or {}).get("Nats-Msg-Id"),
                      "traceparent": (raw.headers or {}).get("traceparent"),
                      "tracestate": (raw.headers or {}).get("tracestate")})  # fmt: skip
    await client.close()
    return found


def run(work: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(work())


def test_a_batch_is_confirmed_when_the_stream_holds_it_in_order_and_once(tmp_path: Path):
    with nats_server(tmp_path) as server:

        async def work() -> None:
            await with_stream(server)
            p, sent = publisher(), batch(5)
            first = await p.publish(destination(server.url), sent)
            assert first.result == CONFIRMED and first.note == "5 confirmed"
            again = await p.publish(destination(server.url), sent)  # a lost confirmation
            assert again.result.ok
            held = await stored(server)
            assert [m["url"] for m in held] == [f"https://o.test/{i}" for i in range(5)]
            assert [m["msg_id"] for m in held] == [m["id"] for m in held]
            assert {m["subject"] for m in held} == {"orders.created.k1"}
            assert held[0]["data"] == {"n": 0} and held[0]["key"] == "k1"
            assert held[0]["traceparent"] is None
            traced = await p.publish(destination(server.url), batch(1, start=5, trace=TRACE))
            assert traced.result.ok
            last = (await stored(server))[-1]
            assert (last["traceparent"], last["tracestate"]) == TRACE
            await p.close()

        run(work)


def test_a_subject_no_stream_captures_and_the_wrong_stream_fail(tmp_path: Path):
    with nats_server(tmp_path) as server:

        async def work() -> None:
            p = publisher()
            none = await p.publish(destination(server.url), batch(2))
            assert none.result.text == NO_STREAM and not none.result.ok
            assert none.note == f"0 of 2 confirmed; then {NO_STREAM}"
            await with_stream(server)
            await with_stream(server, "OTHER", "other.>")
            wrong = await p.publish(destination(server.url, stream="OTHER"), batch(2))
            assert wrong.result.text == STREAM_MISMATCH
            assert (await p.publish(destination(server.url, stream="ORDERS"), batch(2))).result.ok
            await p.close()

        run(work)


def test_a_broker_killed_fails_the_attempt_and_one_restarted_takes_the_rest(tmp_path: Path):
    with nats_server(tmp_path) as server:

        async def work() -> None:
            await with_stream(server)
            p, to = publisher(), destination(server.url)
            assert (await p.publish(to, batch(3))).result.ok
            server.kill()
            loop = asyncio.get_running_loop()
            began = loop.time()
            down = await p.publish(to, batch(3, start=3))  # on the connection it had
            assert not down.result.ok and down.result.outcome in ("connection", "timeout")
            assert loop.time() - began < 3.5  # within BUSBAR_TIMEOUT, never hung
            began = loop.time()
            again = await p.publish(to, batch(3, start=3))  # a new connection, refused
            assert again.result.text == "connection_refused" and loop.time() - began < 1
            server.start()  # the same port and store: an operator's restart
            back = await p.publish(to, batch(3, start=3))
            assert back.result.ok, back.note
            assert [m["url"] for m in await stored(server)] == [
                f"https://o.test/{i}" for i in range(6)
            ]
            await p.close()

        run(work)


def test_a_refused_password_fails_and_never_shows_the_secret(tmp_path: Path):
    with nats_server(tmp_path, auth=("busbar", SECRET)) as server:

        async def work() -> None:
            await with_stream(server)
            p = publisher()
            wrong = destination(server.url, user="busbar", password="not-" + SECRET)
            refused = await p.publish(wrong, batch(1))
            assert refused.result.text == AUTH_FAILED, refused
            assert SECRET not in repr(refused)
            right = destination(server.url, user="busbar", password=SECRET)
            assert (await p.publish(right, batch(1))).result.ok
            await p.close()

        run(work)


def test_an_address_the_policy_refuses_is_never_connected(tmp_path: Path):
    with nats_server(tmp_path) as server:

        async def work() -> None:
            await with_stream(server)
            refused = await publisher(PRODUCTION).publish(destination(server.url), batch(1))
            assert refused.result.text == REFUSED_ADDRESS
            assert await stored(server) == []

        run(work)


@pytest.mark.parametrize("key", ["a.b", "*", ">", "", "spaced key"])
def test_a_key_is_always_one_subject_token(tmp_path: Path, key: str):
    with nats_server(tmp_path) as server:

        async def work() -> None:
            await with_stream(server)
            sent = await publisher().publish(destination(server.url), batch(1, key=key))
            assert sent.result.ok
            (held,) = await stored(server)
            assert held["subject"].count(".") == 2 and "*" not in held["subject"]

        run(work)


def test_a_broker_killed_under_a_batch_fails_it_at_once_not_at_the_timeout(tmp_path: Path):
    """nats-py leaves a PubAck it waits for pending when its connection closes: the
    publisher must not wait out BUSBAR_TIMEOUT (3 s here) for it."""
    with nats_server(tmp_path) as server:

        async def work() -> None:
            await with_stream(server)
            p = publisher()
            loop = asyncio.get_running_loop()
            for round_ in range(3):  # a kill lands between two PubAcks or under one
                if server.process is None:
                    server.start()
                many = batch(20_000, start=round_ * 20_000)
                big = asyncio.create_task(p.publish(destination(server.url), many))
                await asyncio.sleep(0.3)
                killed = loop.time()
                server.kill()
                cut = await big
                assert not cut.result.ok and cut.result.outcome == "connection", cut
                assert loop.time() - killed < 1.0, f"round {round_}: {loop.time() - killed:.2f} s"
            await p.close()

        run(work)


def test_a_connection_gone_silent_fails_at_the_puback_wait_and_a_new_one_takes_over(
    tmp_path: Path,
):
    """A connection that carries nothing more but was never closed (the forwarder
    silenced: a path gone silent, a broker restarted behind a proxy that kept the old
    connection) leaves its PubAck unanswered: the attempt fails as a timeout after
    PUBACK_WAIT_S, not after BUSBAR_TIMEOUT (20 s here), and the next attempt opens a
    new connection and is confirmed."""
    with nats_server(tmp_path) as server, forwarder(("127.0.0.1", server.port)) as path:
        url = f"nats://127.0.0.1:{path.port}"

        async def work() -> None:
            await with_stream(server)
            tls = tls_context(True)
            p = NatsPublisher(Dialer(LOOPBACK_OPEN, tls, 2.0), lambda: tls, timeout=20.0,
                              connect_timeout=2.0)  # fmt: skip
            assert (await p.publish(destination(url), batch(2))).result == CONFIRMED
            path.silence()
            loop = asyncio.get_running_loop()
            began = loop.time()
            stuck = await p.publish(destination(url), batch(2, start=2))
            took = loop.time() - began
            assert stuck.result.text == "timeout" and stuck.note == "0 of 2 confirmed; then timeout"
            assert PUBACK_WAIT_S - 0.5 < took < PUBACK_WAIT_S + 2, took
            again = await p.publish(destination(url), batch(2, start=2))
            assert again.result == CONFIRMED, again
            assert [m["n"] for m in (m["data"] for m in await stored(server))] == [0, 1, 2, 3]
            await p.close()

        run(work)


def test_a_client_closed_without_its_callbacks_fails_the_publish_at_once(tmp_path: Path):
    """nats-py's close calls the disconnect callbacks only after flushing what is
    pending to the socket, and a reset there raises past them: the client ends closed
    and untold. Made here by its close without callbacks while a PubAck is awaited (the
    broker stopped, so none comes): the attempt fails as a lost connection within a
    second, not at PUBACK_WAIT_S."""
    with nats_server(tmp_path) as server:

        async def work() -> None:
            await with_stream(server)
            tls = tls_context(True)
            p = NatsPublisher(Dialer(LOOPBACK_OPEN, tls, 2.0), lambda: tls, timeout=20.0,
                              connect_timeout=2.0)  # fmt: skip
            assert (await p.publish(destination(server.url), batch(1))).result == CONFIRMED
            (link,) = [made for made, _ in p._pool._kept.values()]
            assert server.process is not None
            stop(server.process.pid)  # every thread: none answers after this
            try:
                loop = asyncio.get_running_loop()
                stuck = asyncio.create_task(p.publish(destination(server.url), batch(1, start=1)))
                await asyncio.sleep(0.2)
                began = loop.time()
                await link.client._close(Client.CLOSED, do_cbs=False)
                lost = await stuck
                assert lost.result.text == "connection_error", lost
                assert loop.time() - began < 1.0, loop.time() - began
            finally:
                server.process.send_signal(signal.SIGCONT)
            await p.close()

        run(work)
