"""A worker's way to Amazon SQS destinations: a batch sent ten messages to a
SendMessageBatch, acknowledged only when every entry of every call succeeded.

- In order: each call is awaited before the next is sent, and SQS keeps a FIFO queue's
  batch in its entries' order, so a message group holds a key's events in the bus's
  order. An entry that failed fails the attempt (its code in the attempt log's body):
  busbar sends the whole batch again, and the entries SQS took already carry the same
  MessageDeduplicationId (the event's id), which a FIFO queue drops within its 5-minute
  deduplication window. A standard queue has neither order nor deduplication: what
  was taken before the failure is taken again (docs/destinations.md).
- A FIFO queue's MessageGroupId is the destination's `message_group` template (`{key}`
  unless given), cut to SQS's 128 characters with a digest of the whole when longer,
  so one key is always one group.
- One client per API address, region and credentials (app/delivery/broker_pool.py),
  aiobotocore's, its connections pooled by aiohttp, kept whatever an attempt met (a
  failed connection is aiohttp's to drop; closing the client failed the other
  partitions' calls in flight on it). Botocore's own retries are off:
  busbar's retries, backoff and circuit decide when SQS is tried again. Every address
  an API name resolves to is judged by the callback policy before aiohttp connects
  (Judged, a resolver over app/delivery/dialer.py's `addresses`), and an address given
  as an IP is judged when the client is made; TLS is verified as callbacks are
  (BUSBAR_CA_BUNDLE, BUSBAR_SSL_VERIFY). No proxy the environment names is used
  (botocore's default): a proxy would resolve the name itself, past the policy.
- A total deadline: BUSBAR_TIMEOUT bounds the whole batch.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import aiohttp.abc
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import (
    ClientError,
    ConnectionError,
    ConnectTimeoutError,
    HTTPClientError,
    ReadTimeoutError,
)

from app.delivery.broker_messages import Message, Published, Stop, confirmed_note
from app.delivery.broker_pool import PooledPublisher
from app.delivery.dialer import Dialer
from app.errors import CallbackRefused
from app.models.attempt_result import AUTH_FAILED, CONFIRMED, REFUSED_ADDRESS, failed
from app.models.destination import Destination
from app.services.failure import CONNECTION_ERROR, TIMEOUT, reason

NO_QUEUE = "no_queue"
BROKER_REFUSED = "broker_refused"  # any other refusal: its code is in the note
PER_CALL = 10  # SendMessageBatch's most entries
MAX_CALL_BYTES = 256 * 1024  # a call's bodies together (SQS's limit before 2025's 1 MiB)
MAX_GROUP = 128  # MessageGroupId's most characters
AUTH_CODES = frozenset({
    "InvalidClientTokenId", "SignatureDoesNotMatch", "AccessDenied", "AccessDeniedException",
    "UnrecognizedClientException", "InvalidSecurity", "ExpiredToken", "MissingAuthenticationToken",
})  # fmt: skip
NO_QUEUE_CODES = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})


class Client:
    """An aiobotocore SQS client as the pool keeps it."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.closed = False

    @property
    def alive(self) -> bool:
        return not self.closed

    async def close(self) -> None:
        self.closed = True
        await self.client.close()


class SqsPublisher(PooledPublisher[Client]):
    verify: bool | str = True  # the callbacks' TLS verification (Settings.callback_verify)

    async def publish(
        self, destination: Destination, batch: Sequence[Message], sender: str = "",
        stop: Stop | None = None,
    ) -> Published:  # fmt: skip
        """The batch to the queue, in order; CONFIRMED once every entry succeeded (or
        every one before where `stop` ended it, between calls). Each call's answer is
        its own, whoever the `sender`."""
        del sender
        done = 0
        try:
            async with asyncio.timeout(self._timeout):
                made = await self._pool.connection(destination)
                for call in calls(batch):
                    if stop is not None and stop.now(done):
                        break
                    answer = await made.client.send_message_batch(
                        QueueUrl=destination.url, Entries=entries(call, destination)
                    )
                    failures = answer.get("Failed") or []
                    if failures:
                        first = min(failures, key=lambda f: int(f["Id"]))
                        done += int(first["Id"])
                        why = str(first.get("Code", "failed"))[:64]
                        note = f"{done} of {len(batch)} sent; then {why}"
                        return Published(failed(BROKER_REFUSED), note, done)
                    done += len(call)
        except Exception as exc:  # every way a send fails is a failed attempt
            # the client is kept, whatever failed: it is a pool of HTTP connections,
            # each dropped by aiohttp when it fails, and closing it would fail the
            # other partitions' calls in flight on it (a timeout did, under load)
            why = _reason(exc)
            return Published(failed(why), f"{done} of {len(batch)} sent; then {why}", done)
        return Published(CONFIRMED, confirmed_note(done, len(batch), "sent"), done)

    async def probe(self, destination: Destination) -> Published:
        """The test call's question (app/delivery/trial.py): do the credentials reach
        the queue? Its attributes are read; nothing is sent."""
        try:
            async with asyncio.timeout(self._timeout):
                made = await self._pool.connection(destination)
                await made.client.get_queue_attributes(
                    QueueUrl=destination.url, AttributeNames=["QueueArn"]
                )
        except Exception as exc:  # every way it fails is an answer
            return Published(failed(_reason(exc)), f"queue: {_reason(exc)}")
        return Published(CONFIRMED, "the queue exists and the credentials reach it")

    async def _connect(self, destination: Destination) -> Client:
        endpoint = destination.endpoint or origin(destination.url)
        parts = urlsplit(endpoint)
        await self._dialer.addresses(parts.hostname or "", parts.port or 443)
        config = AioConfig(
            connect_timeout=self._connect_timeout, read_timeout=self._timeout,
            retries={"total_max_attempts": 1}, max_pool_connections=16, proxies={},
            connector_args={"resolver": Judged(self._dialer)},
        )  # fmt: skip
        context = get_session().create_client(
            "sqs", region_name=destination.region, endpoint_url=endpoint,
            aws_access_key_id=destination.user, aws_secret_access_key=destination.password,
            config=config, verify=self.verify,
        )  # fmt: skip
        return Client(await context.__aenter__())


def calls(batch: Sequence[Message]) -> list[list[Message]]:
    """The batch cut into SendMessageBatch calls, in order: at most PER_CALL entries and
    MAX_CALL_BYTES each (a larger message alone, for SQS to refuse by name)."""
    found: list[list[Message]] = []
    size = 0
    for message in batch:
        if not found or len(found[-1]) == PER_CALL or size + len(message.body) > MAX_CALL_BYTES:
            found.append([])
            size = 0
        found[-1].append(message)
        size += len(message.body)
    return found


def entries(call: Sequence[Message], destination: Destination) -> list[dict[str, Any]]:
    """A call's entries, their ids their place in it (which entry failed is its order)."""
    made = []
    for place, message in enumerate(call):
        entry: dict[str, Any] = {"Id": str(place), "MessageBody": message.body.decode()}
        if message.trace:
            entry["MessageAttributes"] = {
                name: {"DataType": "String", "StringValue": value} for name, value in message.trace
            }
        if destination.fifo:
            entry["MessageGroupId"] = group_of(message.subject)
            entry["MessageDeduplicationId"] = message.id
        made.append(entry)
    return made


def group_of(subject: str) -> str:
    """The message group: the template's value, or, past SQS's 128 characters, its start
    and a digest of the whole (one value is always one group)."""
    if len(subject) <= MAX_GROUP:
        return subject
    return f"{subject[: MAX_GROUP - 33]}-{hashlib.sha256(subject.encode()).hexdigest()[:32]}"


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class Judged(aiohttp.abc.AbstractResolver):
    """aiohttp's resolver for an SQS client: a name's addresses are the ones the
    callback policy allows (CallbackRefused when none is)."""

    def __init__(self, dialer: Dialer) -> None:
        self._dialer = dialer

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        """Every allowed address, whatever `family` aiohttp asks for (it asks AF_INET
        unless told otherwise; an IPv6-only name still connects)."""
        del family
        return [
            {"hostname": host, "host": address, "port": port,
             "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
             "proto": socket.IPPROTO_TCP, "flags": socket.AI_NUMERICHOST}
            for address in await self._dialer.addresses(host, port)
        ]  # fmt: skip

    async def close(self) -> None:
        return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in NO_QUEUE_CODES:
            return NO_QUEUE
        if code in AUTH_CODES or status == 403 or code == "403":
            return AUTH_FAILED
        return BROKER_REFUSED
    if isinstance(exc, CallbackRefused) or any(
        isinstance(e, CallbackRefused) for e in (exc.__cause__, exc.__context__)
    ):
        return REFUSED_ADDRESS
    if isinstance(exc, ConnectTimeoutError | ReadTimeoutError):
        return TIMEOUT
    found = reason(exc)  # what botocore wraps: refused, reset, a TLS or DNS failure
    if isinstance(exc, ConnectionError | HTTPClientError) and found == type(exc).__name__:
        return CONNECTION_ERROR  # botocore's own (ConnectionClosedError, ...): no cause
    return found
