"""A worker's way to RabbitMQ destinations: a batch published message by message to the
destination's exchange, acknowledged only when the broker confirmed every one.

- Publisher confirms on, `mandatory` on, and a returned message raises
  (`on_return_raises`): a message no queue is bound to take is a failed attempt
  (`unroutable`), never a silent drop counted as delivered; an exchange that does not
  exist is `no_exchange`. Messages are persistent (delivery mode 2), their
  `message_id` the event's id, `application/json`, with the publish's trace context in
  their headers.
- In order: each confirm is awaited before the next message is sent, so a queue holds
  a batch's events in the batch's order, and a batch that fails part way has stored a
  prefix of it. RabbitMQ does not drop a message it has seen (JetStream does, by id):
  a batch sent again after a lost confirm stores that prefix again, with the same
  `message_id`s, for the consumer to drop (docs/destinations.md).
- One channel per subscriber: aiormq tells a returned message's publish by its
  `message_id`, so two publishes of one event on one channel (two subscriptions on the
  same broker, fanned out the same event) would take each other's return, and an
  unroutable message would count as confirmed (seen in the destination matrix,
  spec/integration/destination_matrix.py). A subscriber's own channel never carries one
  id twice at once; should it be asked to (a batch sent again by another flight while
  the first still waits), that batch goes on a channel of its own, closed after. A
  channel the broker closed (no exchange, access refused) is that subscriber's alone:
  the next attempt opens another, and the others' publishes go on.
- One connection per broker and credentials (app/delivery/broker_pool.py), at most
  MAX_CHANNELS channels on it (the one unused longest closed); not the robust
  connection (aio-pika's reconnecting one raises while it reconnects anyway): a
  connection that dropped is closed and the next attempt opens a new one. The broker's
  addresses are judged by the callback policy before anything connects
  (app/delivery/dialer.py's `addresses`); TLS checks the name.
- A total deadline: BUSBAR_TIMEOUT bounds the whole batch, connect included.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import aio_pika
import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractConnection
from yarl import URL

from app.delivery.broker_messages import Message, Published, Stop, confirmed_note
from app.delivery.broker_pool import PooledPublisher
from app.errors import CallbackRefused
from app.models.attempt_result import AUTH_FAILED, CONFIRMED, REFUSED_ADDRESS, failed
from app.models.destination import Destination
from app.services.failure import reason

UNROUTABLE = "unroutable"  # no queue is bound to take it: returned by `mandatory`
NO_EXCHANGE = "no_exchange"
BROKER_REFUSED = "broker_refused"  # any other refusal of a channel's
CHANNEL_FAILURES = (NO_EXCHANGE, BROKER_REFUSED, AUTH_FAILED)  # the channel's, not the link's
MAX_CHANNELS = 512  # per connection (RabbitMQ's channel_max is 2047)


class Channel:
    """A confirming channel, the exchanges checked on it and the ids it has in flight."""

    def __init__(self, channel: AbstractChannel) -> None:
        self.channel = channel
        # each exchange checked once per channel: a passive declare is a round trip
        # (one per event at `max: 1`); one deleted since fails the publish, which drops
        # the channel and so this map
        self.exchanges: dict[str, aio_pika.abc.AbstractExchange] = {}
        self.in_flight: set[str] = set()

    async def close(self) -> None:
        try:
            await self.channel.close()
        except Exception:  # closed by the broker already: nothing left to free
            return


class Opened:
    """A connection and its subscribers' channels."""

    def __init__(self, connection: AbstractConnection) -> None:
        self.connection = connection
        self.channels: dict[str, Channel] = {}  # by subscriber, the last used last

    @property
    def alive(self) -> bool:
        return not self.connection.is_closed

    async def channel(self, sender: str) -> Channel:
        found = self.channels.pop(sender, None)
        if found is None or found.channel.is_closed:
            if len(self.channels) >= MAX_CHANNELS:
                oldest = next(iter(self.channels))
                asyncio.get_running_loop().create_task(self.channels.pop(oldest).close())
            found = await self.fresh()
        self.channels[sender] = found
        return found

    async def fresh(self) -> Channel:
        opened = await self.connection.channel(publisher_confirms=True, on_return_raises=True)
        return Channel(opened)

    def forget(self, sender: str, channel: Channel) -> None:
        """After a channel-level failure: the broker closed it (or will)."""
        if self.channels.get(sender) is channel:
            del self.channels[sender]
        asyncio.get_running_loop().create_task(channel.close())

    async def close(self) -> None:
        await self.connection.close()


class RabbitMqPublisher(PooledPublisher[Opened]):
    async def publish(
        self, destination: Destination, batch: Sequence[Message], sender: str = "",
        stop: Stop | None = None,
    ) -> Published:  # fmt: skip
        """The batch to the exchange, in order; CONFIRMED once every message was (or
        every one before where `stop` ended it)."""
        done = 0
        opened = channel = None
        ids = {message.id for message in batch}
        try:
            async with asyncio.timeout(self._timeout):
                opened = await self._pool.connection(destination)
                channel = await opened.channel(sender)
                if channel.in_flight & ids:  # one id twice on a channel: a channel apart
                    channel = await opened.fresh()
                    sender = ""
                    lone = channel
                else:
                    lone = None
                channel.in_flight |= ids
                try:
                    exchange = await self._exchange(channel, destination)
                    for i, message in enumerate(batch):
                        if stop is not None and stop.now(i):
                            break
                        await exchange.publish(
                            aio_pika.Message(
                                message.body, content_type="application/json",
                                message_id=message.id, headers=dict(message.trace),
                                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                            ),
                            message.subject, mandatory=True, timeout=self._timeout,
                        )  # fmt: skip
                        done += 1
                finally:
                    channel.in_flight -= ids
                    if lone is not None:
                        await lone.close()
        except Exception as exc:  # every way a publish fails is a failed attempt
            why = _reason(exc)
            if why in CHANNEL_FAILURES and opened is not None and channel is not None:
                opened.forget(sender, channel)  # the broker closed this channel only
            elif why != UNROUTABLE:  # the connection may be dead: the next opens anew
                self._pool.drop(destination, opened)
            return Published(failed(why), f"{done} of {len(batch)} confirmed; then {why}", done)
        return Published(CONFIRMED, confirmed_note(done, len(batch)), done)

    async def probe(self, destination: Destination) -> Published:
        """The test call's question (app/delivery/trial.py): does the broker take the
        connection and the credentials, and does the exchange exist? Nothing is
        published: a test message would reach the consumers' queues."""
        opened = None
        try:
            async with asyncio.timeout(self._timeout):
                opened = await self._pool.connection(destination)
                channel = await opened.fresh()
                try:
                    await self._exchange(channel, destination)
                finally:
                    await channel.close()
        except Exception as exc:  # every way it fails is an answer
            why = _reason(exc)
            if why not in CHANNEL_FAILURES:
                self._pool.drop(destination, opened)
            return Published(failed(why), f"exchange {destination.exchange!r}: {why}")
        return Published(CONFIRMED, f"exchange {destination.exchange!r} exists")

    async def _exchange(
        self, channel: Channel, destination: Destination
    ) -> aio_pika.abc.AbstractExchange:
        """The destination's exchange, declared passively (it must exist: busbar creates
        no exchange) once per channel; the default exchange ("") always exists."""
        name = destination.exchange or ""
        if not name:
            return channel.channel.default_exchange
        found = channel.exchanges.get(name)
        if found is None:
            found = channel.exchanges[name] = await channel.channel.get_exchange(name, ensure=True)
        return found

    async def _connect(self, destination: Destination) -> Opened:
        parts = urlsplit(destination.url)
        host, port = parts.hostname or "", parts.port or 5672
        addresses = await self._dialer.addresses(host, port)
        tls = parts.scheme == "amqps"
        failure: Exception | None = None
        for address in addresses:
            url = URL.build(
                scheme=parts.scheme, host=address, port=port, path=parts.path or "/",
                user=destination.user or "guest", password=destination.password or "guest",
            )  # fmt: skip
            more: dict[str, Any] = (
                {"ssl_context": self._tls(), "server_hostname": host} if tls else {}
            )
            try:
                connection = await aio_pika.connect(
                    url, timeout=self._connect_timeout, client_properties={
                        "connection_name": "busbar"}, **more,
                )  # fmt: skip
            except (OSError, aiormq.exceptions.AMQPConnectionError) as exc:
                failure = exc  # refused or unreachable: the next address
                if isinstance(exc, aiormq.exceptions.ProbableAuthenticationError):
                    raise
                continue
            return Opened(connection)
        assert failure is not None  # addresses never answers an empty list
        raise failure


def _reason(exc: BaseException) -> str:
    if isinstance(exc, aiormq.exceptions.PublishError):
        return UNROUTABLE
    if isinstance(exc, aiormq.exceptions.ChannelNotFoundEntity):
        return NO_EXCHANGE
    if isinstance(
        exc, aiormq.exceptions.ProbableAuthenticationError | aiormq.exceptions.ChannelAccessRefused
    ):
        return AUTH_FAILED
    if isinstance(exc, CallbackRefused):
        return REFUSED_ADDRESS
    if isinstance(exc, aiormq.exceptions.ChannelClosed):
        return BROKER_REFUSED
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, aiormq.exceptions.AMQPConnectionError):
        inner = [a for a in exc.args if isinstance(a, int)]
        return "connection_refused" if 111 in inner else "connection_error"
    return reason(exc)
