"""The brokers' connection pool (app/delivery/broker_pool.py): one connection per broker
and credentials, shared; a dead one replaced at the next use; a failed attempt closes
only the connection it used, never the new one the others use since (an attempt stuck
from before a broker's restart once closed it when it finally timed out)."""

from __future__ import annotations

import asyncio

from app.delivery.broker_pool import BrokerPool
from app.models.destination import Destination


class Made:
    """A connection as the pool sees one: alive until closed."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def pool() -> tuple[BrokerPool[Made], list[Made]]:
    opened: list[Made] = []

    async def opener(_: Destination) -> Made:
        opened.append(Made(len(opened)))
        return opened[-1]

    return BrokerPool(opener, lambda m: not m.closed, lambda m: m.close()), opened


A = Destination("nats", "nats://a.test:4222", "s", user="u", password="one")
A_OTHER_CREDENTIALS = Destination("nats", "nats://a.test:4222", "s", user="u", password="two")


def test_one_connection_per_broker_and_credentials_shared_by_concurrent_attempts():
    async def work() -> None:
        p, opened = pool()
        got = await asyncio.gather(*(p.connection(A) for _ in range(5)))
        assert {m.n for m in got} == {0} and len(opened) == 1
        assert (await p.connection(A_OTHER_CREDENTIALS)).n == 1
        await p.close()
        assert all(m.closed for m in opened)

    asyncio.run(work())


def test_a_late_failure_closes_only_the_connection_it_used():
    async def work() -> None:
        p, _ = pool()
        old = await p.connection(A)
        p.drop(A, old)  # the first failure: closed, and the next use opens anew
        await asyncio.sleep(0)
        new = await p.connection(A)
        assert new is not old and old.closed
        p.drop(A, old)  # an attempt stuck on the old one fails late
        await asyncio.sleep(0)
        assert not new.closed and await p.connection(A) is new
        p.drop(A, None)  # failed before it had a connection: nothing to close
        assert await p.connection(A) is new

    asyncio.run(work())
