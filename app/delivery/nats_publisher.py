"""A worker's way to NATS JetStream destinations: a batch published message by message,
acknowledged only when JetStream confirmed every one (its PubAck).

- One connection per broker and credentials, opened at the first batch for it and
  kept; at most MAX_BROKERS kept (the one unused longest is closed). A connection that
  dropped is not reconnected in the background with publishes buffered behind it (nats-
  py's default): it is closed, the attempt fails at once (`connection_error`), and the
  next attempt opens a new one. busbar's retries, backoff and circuit then apply to a
  broker as to a callback, and nothing waits in a client's buffer that busbar counted
  as sent.
- The address check: the broker's host is resolved and every address judged by the
  callback policy before anything connects (app/delivery/dialer.py's `addresses`); the
  connection goes to an allowed address, with the name kept for TLS.
- In order: each message's PubAck is awaited before the next is sent, so a batch's
  events are stored in the batch's order, and a batch that fails part way has stored a
  prefix of it. Sent again, that prefix's messages carry the same `Nats-Msg-Id` and
  JetStream drops them as duplicates within the stream's duplicate window (2 minutes by
  default): the order per key holds, and the prefix is not stored twice.
- A total deadline: BUSBAR_TIMEOUT bounds the whole batch, connect included.

Every failure is a reason from a fixed set (never an exception's text, which may name
the URL), and a short note for the attempt log's body.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import ssl
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple
from urllib.parse import urlsplit

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client

from app.delivery.broker_messages import Message
from app.delivery.dialer import Dialer
from app.errors import CallbackRefused
from app.models.attempt_result import AUTH_FAILED, REFUSED_ADDRESS, AttemptResult, failed
from app.models.destination import Destination
from app.services.failure import reason

MAX_BROKERS = 256  # connections kept, one per broker and credentials
CONFIRMED = AttemptResult("confirmed", "2xx", ok=True)  # JetStream stored every message
NO_STREAM = "no_stream"  # no stream captures the subject
STREAM_MISMATCH = "stream_mismatch"  # a stream captures it, not the destination's `stream`
BROKER_REFUSED = "broker_refused"  # any other JetStream refusal


class Published(NamedTuple):
    result: AttemptResult
    note: str  # for the attempt log's body: what the broker said, never a secret


class NatsPublisher:
    def __init__(
        self, dialer: Dialer, tls: Callable[[], ssl.SSLContext], timeout: float,
        connect_timeout: float,
    ) -> None:  # fmt: skip
        self._dialer = dialer
        self._tls = tls
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._clients: dict[str, tuple[Client, float]] = {}  # by broker and credentials
        self._opening: dict[str, asyncio.Lock] = {}

    async def publish(self, destination: Destination, batch: Sequence[Message]) -> Published:
        """The batch into JetStream, in order; CONFIRMED once every message was."""
        done = 0
        try:
            async with asyncio.timeout(self._timeout):
                js = (await self._client(destination)).jetstream()
                for message in batch:
                    headers = {
                        "Nats-Msg-Id": message.id,
                        "Content-Type": "application/json",
                        **dict(message.trace),
                    }
                    await js.publish(message.subject, message.body, timeout=self._timeout,
                                     stream=destination.stream, headers=headers)  # fmt: skip
                    done += 1
        except Exception as exc:  # every way a publish fails is a failed attempt
            why = _reason(exc)
            if why not in (NO_STREAM, STREAM_MISMATCH, BROKER_REFUSED):
                self._drop(destination)  # it may be dead: the next attempt opens anew
            return Published(failed(why), f"{done} of {len(batch)} confirmed; then {why}")
        return Published(CONFIRMED, f"{len(batch)} confirmed")

    async def probe(self, destination: Destination) -> Published:
        """The test call's question (app/delivery/trial.py): does the broker take the
        connection and the credentials, and does a stream (the destination's `stream`,
        when named) capture its subject? Nothing is published: a test message would be
        one more message in the consumers' stream."""
        subject = destination.subject_for("test", "test", "test")
        try:
            async with asyncio.timeout(self._timeout):
                js = (await self._client(destination)).jetstream()
                stream = await js.find_stream_name_by_subject(subject)
        except Exception as exc:  # every way it fails is an answer
            why = _reason(exc)
            return Published(failed(why), f"{subject}: {why}")
        if destination.stream is not None and stream != destination.stream:
            note = f"{subject} is captured by stream {stream}, not {destination.stream}"
            return Published(failed(STREAM_MISMATCH), note)
        return Published(CONFIRMED, f"stream {stream} captures {subject}")

    async def _client(self, destination: Destination) -> Client:
        name = _connection_name(destination)
        kept = self._clients.get(name)
        if kept is not None and kept[0].is_connected:
            self._clients[name] = (kept[0], time.monotonic())
            return kept[0]
        lock = self._opening.setdefault(name, asyncio.Lock())
        async with lock:
            kept = self._clients.get(name)
            if kept is not None and kept[0].is_connected:
                return kept[0]
            if kept is not None:
                await _closed(kept[0])
            client = await self._connect(destination)
            self._keep(name, client)
            return client

    async def _connect(self, destination: Destination) -> Client:
        parts = urlsplit(destination.url)
        host, port = parts.hostname or "", parts.port or 4222
        addresses = await self._dialer.addresses(host, port)
        tls = parts.scheme == "tls"
        servers = [f"nats://{_bracketed(a)}:{port}" for a in addresses]
        errors: list[Exception] = []

        async def heard(exc: Exception) -> None:  # nats-py tells why here, not in its raise
            errors.append(exc)

        try:
            return await nats.connect(
                servers, name="busbar", allow_reconnect=False, dont_randomize=True,
                # nats-py's connect tries each server reconnects+1 times (0 is forever)
                max_reconnect_attempts=1, reconnect_time_wait=0,
                connect_timeout=max(1, round(self._connect_timeout)),
                tls=self._tls() if tls else None, tls_hostname=host if tls else None,
                user=destination.user, password=destination.password, token=destination.token,
                error_cb=heard, disconnected_cb=_nothing, closed_cb=_nothing,
            )  # fmt: skip
        except nats.errors.NoServersError as exc:
            raise (errors[-1] if errors else exc) from None

    def _keep(self, name: str, client: Client) -> None:
        if len(self._clients) >= MAX_BROKERS:
            oldest = min(self._clients, key=lambda n: self._clients[n][1])
            old, _ = self._clients.pop(oldest)
            self._opening.pop(oldest, None)
            asyncio.get_running_loop().create_task(_closed(old))
        self._clients[name] = (client, time.monotonic())

    def _drop(self, destination: Destination) -> None:
        kept = self._clients.pop(_connection_name(destination), None)
        if kept is not None:
            asyncio.get_running_loop().create_task(_closed(kept[0]))

    async def close(self) -> None:
        clients, self._clients = self._clients, {}
        for client, _ in clients.values():
            await _closed(client)


def _connection_name(destination: Destination) -> str:
    """Which connection serves it: one per broker and credentials (the secrets hashed,
    so the map never holds them as keys a dump would show)."""
    secret = f"{destination.user}\0{destination.password}\0{destination.token}"
    return f"{destination.url}#{hashlib.sha256(secret.encode()).hexdigest()[:16]}"


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


async def _nothing() -> None:
    """Without callbacks nats-py logs each disconnect at error level."""
