"""A batch to its subscription's destination, a broker in place of the callback
(docs/destinations.md): the stored destination opened (its secrets unsealed once per
stored content and kept), the batch made one message per event
(app/delivery/broker_messages.py) and published by its kind's publisher
(app/delivery/nats_publisher.py, rabbitmq_publisher.py, sqs_publisher.py), which
answers an AttemptResult as a callback's answer is one. Each publisher, and its client
library (nats-py and aio-pika take about 0.1 s each to import, aiobotocore more), is
made at its kind's first batch: a worker whose subscriptions have no destination never
loads them. The steps (app/delivery/steps.py) decide whether to send, as for a
callback: a failing subscription's attempt still waits for a place in the failing share.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import logging
import ssl
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from app.delivery.answer import KEPT
from app.delivery.broker_messages import Message, Published, Stop, messages
from app.delivery.dialer import Dialer
from app.delivery.flight import Flight
from app.delivery.request import check_lease
from app.models.attempt_result import UNSEALABLE, AttemptResult, failed
from app.models.destination import Destination, opened
from app.models.keys import owner
from app.models.sealed import Sealer, Unsealable
from config.settings import Settings

log = logging.getLogger(__name__)
REMEMBERED = 4096  # stored destinations a worker keeps opened
MODULES = {"nats": "app.delivery.nats_publisher", "rabbitmq": "app.delivery.rabbitmq_publisher",
           "sqs": "app.delivery.sqs_publisher"}  # fmt: skip


class Destinations:
    def __init__(
        self, dialer: Dialer, tls: Callable[[], ssl.SSLContext], sealer: Callable[[], Sealer],
        settings: Settings,
    ) -> None:  # fmt: skip
        self._made: tuple[Dialer, Callable[[], ssl.SSLContext], Settings] = (
            dialer, tls, settings,
        )  # fmt: skip
        self._settings = settings
        self._publishers: dict[str, Publisher] = {}  # by kind, made at its first use
        self._sealer = sealer
        self._opened: dict[tuple[str, bytes], Destination] = {}

    async def send(self, flight: Flight) -> AttemptResult:
        """The batch published; why not, in the attempt log's body, when it was not. Not
        published (JobLost) when the flight began over half the scrub window ago, as a
        callback's request is not sent then (app/delivery/request.py's check_lease)."""
        check_lease(flight, self._settings)
        try:
            destination = self._destination(flight)
        except Unsealable as exc:  # sent without its secret, it would be refused anyway
            log.warning("delivery to %s not sent: a secret of its destination does not "
                        "open: %s", flight.client, exc.message)  # fmt: skip
            flight.answer[:] = exc.message.encode()[:KEPT]
            return failed(UNSEALABLE)
        batch = messages(flight, destination)
        publisher = await self._publisher(destination.type)
        published = await publisher.publish(
            destination, batch, owner(flight.pid), flight_stop(flight, self._settings.timeout)
        )
        flight.answer[:] = published.note.encode()[:KEPT]
        flight.confirmed[:] = [published.confirmed]
        if not published.result.ok:
            log.info("delivery to %s (%s) failed: %s", flight.client,
                     destination.url, published.note)  # fmt: skip
        return published.result

    def _destination(self, flight: Flight) -> Destination:
        """Opened once per subscriber and stored content."""
        subscriber = owner(flight.pid)
        found = self._opened.get((subscriber, flight.destination))
        if found is None:
            if len(self._opened) >= REMEMBERED:
                self._opened.clear()
            found = opened(flight.destination, self._sealer(), subscriber)
            self._opened[(subscriber, flight.destination)] = found
        return found

    async def _publisher(self, kind: str) -> Publisher:
        found = self._publishers.get(kind)
        if found is None:
            # imported on a thread: the loop goes on delivering meanwhile (aiobotocore
            # and botocore take about a second)
            await asyncio.to_thread(importlib.import_module, MODULES[kind])
            found = self._publishers.setdefault(kind, publisher_for(kind, *self._made))
        return found

    async def close(self) -> None:
        for publisher in self._publishers.values():
            await publisher.close()


def flight_stop(flight: Flight, timeout_s: float) -> Stop | None:
    """Where a flight of gathered batches may end early: at a gathered batch's first
    message once half of `timeout_s` (BUSBAR_TIMEOUT, the whole flight's bound) has
    passed, so a slow broker takes the batches it can in time rather than the flight
    timing out on one that would have gone alone, a failed attempt counted against it
    (and against `max_attempts`); the rest go in the next flight."""
    if not flight.more:
        return None
    sizes = [len(flight.entries), *(len(g.entries) for g in flight.more)]
    return Stop(time.monotonic() + timeout_s / 2, frozenset(itertools.accumulate(sizes[:-1])))


class Publisher(Protocol):
    """One kind of broker's: app/delivery/nats_publisher.py, rabbitmq_publisher.py,
    sqs_publisher.py."""

    async def publish(
        self, destination: Destination, batch: Sequence[Message], sender: str = "",
        stop: Stop | None = None,
    ) -> Published:  # fmt: skip
        """The batch, in order; CONFIRMED once the broker confirmed every message, or
        every one before a place `stop` ended it at (Published.confirmed says how many).
        `sender`, the subscriber, keeps each subscriber's publishes apart where the
        client needs it (RabbitMQ: a channel each)."""

    async def probe(self, destination: Destination) -> Published:
        """The test call's question, nothing published."""

    async def close(self) -> None: ...


def publisher_for(
    kind: str, dialer: Dialer, tls: Callable[[], ssl.SSLContext], settings: Settings
) -> Publisher:
    """The kind's publisher, its client library imported only now."""
    made = (dialer, tls, settings.timeout, settings.connect_timeout)
    if kind == "rabbitmq":
        from app.delivery.rabbitmq_publisher import RabbitMqPublisher

        return RabbitMqPublisher(*made)
    if kind == "sqs":
        from app.delivery.sqs_publisher import SqsPublisher

        sqs = SqsPublisher(*made)
        sqs.verify = settings.callback_verify
        return sqs
    from app.delivery.nats_publisher import NatsPublisher

    return NatsPublisher(*made)
