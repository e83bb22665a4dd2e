"""A worker's connections to the brokers of its destinations, one per broker and
credentials, for every kind of broker (app/delivery/nats_publisher.py,
rabbitmq_publisher.py, sqs_publisher.py: there one client per API address and region).

Opened at the first batch for a broker and kept; at most MAX_BROKERS kept (the one
unused longest is closed). A connection that dropped is not mended in the background:
its publisher drops it at the failed attempt, and the next attempt opens a new one, so
busbar's retries, backoff and circuit decide when a broker is tried again. One opening at
a time per broker: the deliveries that need it meanwhile wait for that one.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar

from app.delivery.dialer import Dialer
from app.models.destination import Destination

MAX_BROKERS = 256  # connections kept, one per broker and credentials
C = TypeVar("C")


class BrokerPool(Generic[C]):
    def __init__(
        self,
        opener: Callable[[Destination], Awaitable[C]],
        alive: Callable[[C], bool],
        closer: Callable[[C], Awaitable[None]],
    ) -> None:
        self._opener = opener
        self._alive = alive
        self._closer = closer
        self._kept: dict[str, tuple[C, float]] = {}  # by broker and credentials
        self._opening: dict[str, asyncio.Lock] = {}

    async def connection(self, destination: Destination) -> C:
        name = connection_name(destination)
        kept = self._kept.get(name)
        if kept is not None and self._alive(kept[0]):
            self._kept[name] = (kept[0], time.monotonic())
            return kept[0]
        async with self._opening.setdefault(name, asyncio.Lock()):
            kept = self._kept.get(name)
            if kept is not None and self._alive(kept[0]):
                return kept[0]
            if kept is not None:
                await self._quietly_closed(kept[0])
            made = await self._opener(destination)
            self._keep(name, made)
            return made

    def drop(self, destination: Destination, made: C | None) -> None:
        """After a failure that may mean `made`, the connection the attempt used, is
        dead: closed, and the next attempt opens a new one. Only that one: an attempt
        that failed late (stuck on a connection from before a broker's restart) must
        not close the new connection the others use since."""
        if made is None:
            return
        name = connection_name(destination)
        kept = self._kept.get(name)
        if kept is not None and kept[0] is made:
            del self._kept[name]
        asyncio.get_running_loop().create_task(self._quietly_closed(made))

    async def close(self) -> None:
        kept, self._kept = self._kept, {}
        for made, _ in kept.values():
            await self._quietly_closed(made)

    def _keep(self, name: str, made: C) -> None:
        if len(self._kept) >= MAX_BROKERS:
            oldest = min(self._kept, key=lambda n: self._kept[n][1])
            old, _ = self._kept.pop(oldest)
            self._opening.pop(oldest, None)
            asyncio.get_running_loop().create_task(self._quietly_closed(old))
        self._kept[name] = (made, time.monotonic())

    async def _quietly_closed(self, made: C) -> None:
        try:
            await self._closer(made)
        except Exception:  # already closed, or the broker gone: nothing left to free
            return


def connection_name(destination: Destination) -> str:
    """Which connection serves it: one per broker and credentials (the secrets hashed,
    so the map never holds them as keys a dump would show)."""
    secret = f"{destination.user}\0{destination.password}\0{destination.token}"
    return f"{destination.connects_to}#{hashlib.sha256(secret.encode()).hexdigest()[:16]}"


class Pooled(Protocol):
    """A publisher's connection, as its pool keeps it."""

    @property
    def alive(self) -> bool: ...

    async def close(self) -> None: ...


P = TypeVar("P", bound=Pooled)


class PooledPublisher(Generic[P]):
    """What every kind's publisher starts from: how to reach a broker (the dialer that
    judges its addresses, the TLS context), the deadlines, and its pool of connections,
    each opened by the kind's own `_connect`."""

    def __init__(
        self, dialer: Dialer, tls: Callable[[], ssl.SSLContext], timeout: float,
        connect_timeout: float,
    ) -> None:  # fmt: skip
        self._dialer = dialer
        self._tls = tls
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._pool: BrokerPool[P] = BrokerPool(
            self._connect, lambda made: made.alive, lambda made: made.close()
        )

    async def _connect(self, destination: Destination) -> P:
        raise NotImplementedError

    async def close(self) -> None:
        await self._pool.close()
