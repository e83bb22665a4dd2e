"""A worker's way to NATS JetStream destinations: a batch published message by message,
acknowledged only when JetStream confirmed every one (its PubAck).

- One connection per broker and credentials (app/delivery/broker_pool.py). A
  connection that dropped is not reconnected in the background with publishes buffered
  behind it (nats-py's default): it is closed, the attempt fails, and the next attempt
  opens a new one. busbar's retries, backoff and circuit then apply to a broker as to a
  callback, and nothing waits in a client's buffer that busbar counted as sent.
- The address check: the broker's host is resolved and every address judged by the
  callback policy before anything connects (app/delivery/dialer.py's `addresses`); the
  connection goes to an allowed address, with the name kept for TLS.
- In order: each message's PubAck is awaited before the next is sent, so a batch's
  events are stored in the batch's order, and a batch that fails part way has stored a
  prefix of it. Sent again, that prefix's messages carry the same `Nats-Msg-Id` and
  JetStream drops them as duplicates within the stream's duplicate window (2 minutes by
  default): the order per key holds, and the prefix is not stored twice.
- A total deadline: BUSBAR_TIMEOUT bounds the whole batch, connect included; and each
  PubAck is waited for PUBACK_WAIT_S at most (nats-py's own default for it). JetStream
  confirms in milliseconds; a PubAck that has not come in seconds is on a connection
  that is dead without having said so (a broker restarted behind a NAT or a proxy that
  kept the old connection open, a path gone silent): the attempt fails as a timeout,
  the connection is dropped, and the next attempt opens a new one, rather than the
  key waiting out BUSBAR_TIMEOUT (20 s) on it.

Every failure is a reason from a fixed set (never an exception's text, which may name
the URL), and a short note for the attempt log's body.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client

from app.delivery.broker_messages import Message, Published, Stop, confirmed_note
from app.delivery.broker_pool import PooledPublisher
from app.errors import CallbackRefused
from app.models.attempt_result import AUTH_FAILED, CONFIRMED, REFUSED_ADDRESS, failed
from app.models.destination import Destination
from app.services.failure import reason

T = TypeVar("T")

NO_STREAM = "no_stream"  # no stream captures the subject
STREAM_MISMATCH = "stream_mismatch"  # a stream captures it, not the destination's `stream`
BROKER_REFUSED = "broker_refused"  # any other JetStream refusal
PUBACK_WAIT_S = 5.0  # longest wait for one message's PubAck (within BUSBAR_TIMEOUT)
LOOK_S = 0.25  # how often a publish looks whether its client was closed untold (Link)


class NatsPublisher(PooledPublisher["Link"]):
    async def publish(
        self, destination: Destination, batch: Sequence[Message], sender: str = "",
        stop: Stop | None = None,
    ) -> Published:  # fmt: skip
        """The batch into JetStream, in order; CONFIRMED once every message was (or every
        one before where `stop` ended it). A connection lost under the batch fails it at
        once: nats-py would leave the PubAck it waits for pending until BUSBAR_TIMEOUT.
        Each PubAck answers its own request, whoever the `sender`."""
        del sender
        done: list[Message] = []
        link = None
        try:
            async with asyncio.timeout(self._timeout):
                link = await self._pool.connection(destination)
                await link.unless_lost(self._published(link, destination, batch, done, stop))
        except Exception as exc:  # every way a publish fails is a failed attempt
            why = _reason(exc)
            if why not in (NO_STREAM, STREAM_MISMATCH, BROKER_REFUSED):
                self._pool.drop(destination, link)  # it may be dead: the next opens anew
            note = f"{len(done)} of {len(batch)} confirmed; then {why}"
            return Published(failed(why), note, len(done))
        return Published(CONFIRMED, confirmed_note(len(done), len(batch)), len(done))

    @property
    def _puback_s(self) -> float:
        return min(self._timeout, PUBACK_WAIT_S)

    async def _published(
        self, link: Link, destination: Destination, batch: Sequence[Message],
        done: list[Message], stop: Stop | None,
    ) -> None:  # fmt: skip
        js = link.client.jetstream()
        for i, message in enumerate(batch):
            if stop is not None and stop.now(i):
                return
            headers = {"Nats-Msg-Id": message.id, "Content-Type": "application/json",
                       **dict(message.trace)}  # fmt: skip
            await js.publish(message.subject, message.body, timeout=self._puback_s,
                             stream=destination.stream, headers=headers)  # fmt: skip
            done.append(message)

    async def probe(self, destination: Destination) -> Published:
        """The test call's question (app/delivery/trial.py): does the broker take the
        connection and the credentials, and does a stream (the destination's `stream`,
        when named) capture its subject? Nothing is published: a test message would be
        one more message in the consumers' stream."""
        subject = destination.subject_for("test", "test", "test")
        try:
            async with asyncio.timeout(self._timeout):
                link = await self._pool.connection(destination)
                stream = await link.unless_lost(
                    link.client.jetstream().find_stream_name_by_subject(subject)
                )
        except Exception as exc:  # every way it fails is an answer
            why = _reason(exc)
            return Published(failed(why), f"{subject}: {why}")
        if destination.stream is not None and stream != destination.stream:
            note = f"{subject} is captured by stream {stream}, not {destination.stream}"
            return Published(failed(STREAM_MISMATCH), note)
        return Published(CONFIRMED, f"stream {stream} captures {subject}")

    async def _connect(self, destination: Destination) -> Link:
        parts = urlsplit(destination.url)
        host, port = parts.hostname or "", parts.port or 4222
        addresses = await self._dialer.addresses(host, port)
        tls = parts.scheme == "tls"
        servers = [f"nats://{_bracketed(a)}:{port}" for a in addresses]
        errors: list[Exception] = []
        lost = asyncio.Event()

        async def heard(exc: Exception) -> None:  # nats-py tells why here, not in its raise
            errors.append(exc)

        async def gone() -> None:
            lost.set()

        try:
            client = await nats.connect(
                servers, name="busbar", allow_reconnect=False, dont_randomize=True,
                # nats-py's connect tries each server reconnects+1 times (0 is forever)
                max_reconnect_attempts=1, reconnect_time_wait=0,
                connect_timeout=max(1, round(self._connect_timeout)),
                tls=self._tls() if tls else None, tls_hostname=host if tls else None,
                user=destination.user, password=destination.password, token=destination.token,
                error_cb=heard, disconnected_cb=gone, closed_cb=gone,
            )  # fmt: skip
        except nats.errors.NoServersError as exc:
            raise (errors[-1] if errors else exc) from None
        return Link(client, lost)


class Link:
    """A connection, and whether it was lost: nats-py's callbacks say so at once, but
    not when its own close fails part way (nats-py 2.x's `_close` flushes what is still
    pending to the dead socket before it calls them, and a reset there raises past
    them: the client is closed and nobody is told), so a publish also looks at the
    client's state every LOOK_S."""

    def __init__(self, client: Client, lost: asyncio.Event) -> None:
        self.client = client
        self.lost = lost

    async def unless_lost(self, work: Coroutine[Any, Any, T]) -> T:
        """`work`, or ConnectionClosedError as soon as the connection is lost under it."""
        task = asyncio.ensure_future(work)
        watch = asyncio.ensure_future(self._gone())
        try:
            await asyncio.wait((task, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if task.cancelled():  # the connection went first
            raise nats.errors.ConnectionClosedError
        return task.result()

    async def _gone(self) -> None:
        while not (self.lost.is_set() or self.client.is_closed):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LOOK_S):
                    await self.lost.wait()

    @property
    def alive(self) -> bool:
        return bool(self.client.is_connected)

    async def close(self) -> None:
        await _closed(self.client)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, nats.js.errors.NoStreamResponseError | nats.js.errors.NotFoundError):
        return NO_STREAM
    if isinstance(exc, nats.js.errors.APIError):
        return STREAM_MISMATCH if exc.err_code == 10060 else BROKER_REFUSED
    if isinstance(exc, nats.errors.AuthorizationError) or "Authorization Violation" in str(exc):
        return AUTH_FAILED
    if isinstance(exc, CallbackRefused):
        return REFUSED_ADDRESS
    if isinstance(exc, TimeoutError | nats.errors.TimeoutError):
        return "timeout"
    if isinstance(exc, nats.errors.NoServersError | nats.errors.ConnectionClosedError):
        return "connection_error"
    return reason(exc)


def _bracketed(address: str) -> str:
    return f"[{address}]" if ipaddress.ip_address(address).version == 6 else address


async def _closed(client: Client) -> None:
    try:
        await client.close()
    except Exception:  # already closed, or the broker gone: nothing left to free
        return
