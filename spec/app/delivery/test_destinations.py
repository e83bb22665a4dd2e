"""A flight to its destination (app/delivery/destinations.py), against a real nats-server:
the stored destination is opened for its own subscriber only (a copy under another is a
failed attempt, `secret_unsealable`, with nothing published and no secret in the
attempt log's body); a flight whose lease ran out is not published at all (JobLost),
as a callback's request is not sent then; a batch published fills the attempt log's
body with how many the broker confirmed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import nats
import pytest

from app import codec
from app.delivery.callback import tls_context
from app.delivery.destinations import Destinations
from app.delivery.dialer import Dialer
from app.delivery.flight import Flight
from app.errors import JobLost
from app.models.attempt_result import UNSEALABLE
from app.models.callback_policy import LOOPBACK_OPEN
from app.models.destination import Destination
from app.models.sealed import Sealer
from config.settings import Settings
from spec.nats_server import NatsServer, nats_server

SECRET = "destination-pass"
SEALER = Sealer(b"s" * 32)
SETTINGS = Settings(timeout=3, connect_timeout=1, scrub_after_ms=10_000, root_key="dest-root")


def destinations() -> Destinations:
    tls = tls_context(True)
    return Destinations(Dialer(LOOPBACK_OPEN, tls, 1.0), lambda: tls, lambda: SEALER, SETTINGS)


def flight(server: NatsServer, owner: str, began: float | None = None) -> Flight:
    stored = Destination("nats", server.url, "orders.{key}", user="busbar", password=SECRET)
    entries = [b"0|" + codec.pack_event("orders", "create", f"https://o.test/{i}", i, {"i": i})
               for i in range(3)]  # fmt: skip
    return Flight(
        "tok", "w", b"J", b"B", "N", time.monotonic() if began is None else began,
        server.url, "u", "client", entries,
        destination=stored.stored(SEALER, owner, 1).encode(),
    )  # fmt: skip


async def messages_in(server: NatsServer) -> int:
    client = await nats.connect(server.url, user="busbar", password=SECRET)
    js = client.jetstream()
    try:
        return (await js.stream_info("ORDERS")).state.messages
    finally:
        await client.close()


async def with_stream(server: NatsServer) -> None:
    client = await nats.connect(server.url, user="busbar", password=SECRET)
    await client.jetstream().add_stream(name="ORDERS", subjects=["orders.>"])
    await client.close()


def test_a_flight_is_published_and_its_attempt_body_says_how_many(tmp_path: Path):
    with nats_server(tmp_path, auth=("busbar", SECRET)) as server:

        async def work() -> None:
            await with_stream(server)
            d = destinations()
            sent = flight(server, "tok")
            result = await d.send(sent)
            assert result.ok and bytes(sent.answer) == b"3 confirmed"
            assert await messages_in(server) == 3
            await d.close()

        asyncio.run(work())


def test_a_destination_sealed_for_another_subscriber_does_not_open(tmp_path: Path):
    with nats_server(tmp_path, auth=("busbar", SECRET)) as server:

        async def work() -> None:
            await with_stream(server)
            copied = flight(server, "someone-else")
            result = await destinations().send(copied)
            assert result.text == UNSEALABLE and not result.ok
            assert SECRET.encode() not in bytes(copied.answer) and bytes(copied.answer)
            assert await messages_in(server) == 0

        asyncio.run(work())


def test_a_flight_past_its_lease_is_not_published(tmp_path: Path):
    with nats_server(tmp_path, auth=("busbar", SECRET)) as server:

        async def work() -> None:
            await with_stream(server)
            stale = flight(server, "tok", began=time.monotonic() - 6)  # half the window: 5 s
            with pytest.raises(JobLost):
                await destinations().send(stale)
            assert await messages_in(server) == 0

        asyncio.run(work())


def test_every_kind_has_its_publisher_module_and_each_answers_its_kind():
    """A kind added to app/models/destination_types.py without its module would fail at
    its first batch, in a worker; here it fails in make test."""
    import importlib

    from app.delivery.destinations import MODULES, publisher_for
    from app.models.destination_types import KINDS

    assert set(MODULES) == set(KINDS)
    tls = tls_context(True)
    for kind, module in MODULES.items():
        made = publisher_for(kind, Dialer(LOOPBACK_OPEN, tls, 1.0), lambda: tls, Settings())
        assert type(made).__module__ == importlib.import_module(module).__name__
