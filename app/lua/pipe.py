"""The delivery engine's script calls on one Redis, pipelined over a few connections.

A busy engine has hundreds of slots asking Redis at once, each one script call per
delivery. Sent one by one, every call paid for a pool checkout (redis-py wraps it in an
argument-deprecation check that inspects the call), a write, a read that waits on a
future of its own, and a timer; that was a fifth of the worker's CPU. Here a call is a
future in a queue: once per turn of the event loop, whatever is queued goes to an idle
connection in one write, and the replies are read back in order (a fan-out's calls go
in batches of tens; a lone call still goes at once, alone). One timer bounds a batch.

With BUSBAR_REDIS_MIN_REPLICAS, a batch's write ends with `WAIT n timeout` on the same
connection, and its calls are answered only after it: a settle is acknowledged to its
slot once that many replicas hold it. Short of them in time, the calls still get their
replies (what ran stays run), each wrapped in Unconfirmed so that a delivery one of them
began is held back rather than sent, and a warning is logged.

Nothing about the calls' meaning changes: each is its own EVALSHA, atomic in Redis,
answered in the order sent. An idle connection the server has closed (a restart) is
replaced before a batch is written to it (closed_by_server): those calls never reached
any server, so they go on a new connection instead of failing. A connection that fails
or times out mid-batch is dropped
and every call of the batch not yet answered fails with a Redis connection error: it
may or may not have run, exactly as a call whose connection was lost alone, and the
engine handles it the same way (the slot gives back its own pending lists). An error
reply (NOSCRIPT after a restart, BUSY) fails its own call only: the whole reply was read,
so the connection is still in step. Connections are redis-py's (its connect, AUTH, TLS
and hiredis parser), held for the engine's life, at most `connections` of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any

import hiredis
import redis
import redis.asyncio

from app.lua.replicated import Unconfirmed
from app.models import replicas as replica_barrier

MAX_BATCH = 128  # calls in one write at most
CALL_TIMEOUT_S = 5.0  # a batch without every answer by then drops its connection

Waiting = tuple[bytes, "asyncio.Future[Any]"]
log = logging.getLogger(__name__)


class Pipe:
    def __init__(
        self,
        client: redis.asyncio.Redis,
        connections: int,
        replicas: int = 0,
        replica_timeout_ms: int = 1000,
    ) -> None:
        self._pool = client.connection_pool
        self._replicas = replicas
        self._wait = hiredis.pack_command(replica_barrier.wait(replicas, replica_timeout_ms))
        self._limit = connections
        self._idle: list[Any] = []  # redis.asyncio.Connection
        self._made = 0
        self._queue: deque[Waiting] = deque()
        self._kicked = False
        self._running: set[asyncio.Task[None]] = set()

    def call(self, packed: bytes) -> asyncio.Future[Any]:
        """Queue one packed command; the future has its reply (or its error)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((packed, future))
        self._again()
        return future

    def _kick(self) -> None:
        self._kicked = False
        while self._queue and (self._idle or self._made < self._limit):
            batch = [self._queue.popleft() for _ in range(min(len(self._queue), MAX_BATCH))]
            connection = self._idle.pop() if self._idle else None
            if connection is None:
                self._made += 1  # _run takes a new one from the pool
            task = asyncio.get_running_loop().create_task(self._run(batch, connection))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _run(self, batch: list[Waiting], connection: Any) -> None:
        if connection is None:
            try:
                connection = await self._pool.get_connection()  # type: ignore[no-untyped-call]  # redis-py: untyped
            except BaseException as exc:
                self._made -= 1
                _fail(batch, exc)
                self._again()
                if not isinstance(exc, Exception):
                    raise
                return
        if closed_by_server(connection):  # never written to it: a new connection carries it
            await connection.disconnect(nowait=True)  # send_packed_command connects again
        try:
            async with asyncio.timeout(CALL_TIMEOUT_S):
                packed = [p for p, _ in batch] + ([self._wait] if self._replicas else [])
                await connection.send_packed_command(packed, check_health=False)
                held: list[tuple[asyncio.Future[Any], Any]] = []
                for _, future in batch:
                    try:
                        reply = await connection.read_response(disconnect_on_error=False)
                    except redis.ResponseError as exc:
                        reply = exc
                    if self._replicas:
                        held.append((future, reply))  # answered once the WAIT is
                    else:
                        _answer(future, reply)
                if self._replicas:
                    ok = self._waited(await connection.read_response(disconnect_on_error=False))
                    for future, reply in held:
                        _answer(future, reply if ok else Unconfirmed(reply))
        except BaseException as exc:
            await connection.disconnect(nowait=True)
            _fail(batch, exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._idle.append(connection)
            self._again()

    def _waited(self, acked: Any) -> bool:
        if replica_barrier.held(acked, self._replicas):
            return True
        log.warning(
            "calls not confirmed by %d replica(s) in time (%s did): they stand on the "
            "master, lost there if it dies before they copy them; deliveries they began "
            "are held back", self._replicas, acked,
        )  # fmt: skip
        return False

    def _again(self) -> None:
        """What is queued goes on the loop's next turn (calls queued while every
        connection was busy, once one is free)."""
        if self._queue and not self._kicked:
            self._kicked = True
            asyncio.get_running_loop().call_soon(self._kick)

    async def close(self) -> None:
        for task in list(self._running):
            task.cancel()
        for connection in self._idle:
            await connection.disconnect(nowait=True)
            await self._pool.release(connection)
        self._idle.clear()


def closed_by_server(connection: Any) -> bool:
    """The server closed this idle connection (it restarted, or timed the client out):
    its end of stream has been read, and nothing else is waiting there. A batch written
    to it would fail without reaching any server, and its calls would be failed as if
    they might have run: a settle failed that way gives its job back, and the batch,
    delivered and acknowledged by the subscriber, is sent again for nothing. So such a
    connection is replaced before the write: its calls provably never reached Redis.
    (redis-py 8.1's asyncio connection reads through an asyncio StreamReader, `_reader`,
    which records the end of stream as it comes, whether or not a read is waiting.)"""
    reader = getattr(connection, "_reader", None)
    return isinstance(reader, asyncio.StreamReader) and reader.at_eof()


def _answer(future: asyncio.Future[Any], reply: Any) -> None:
    """A call's reply, or its own error reply (which fails only that call)."""
    if future.done():
        return
    if isinstance(reply, Unconfirmed) and isinstance(reply.reply, redis.ResponseError):
        reply = reply.reply  # an error changed nothing: nothing to confirm
    if isinstance(reply, redis.ResponseError):
        future.set_exception(reply)
    else:
        future.set_result(reply)


def _fail(batch: list[Waiting], exc: BaseException) -> None:
    """Every call of the batch not yet answered fails as a lost connection would."""
    if isinstance(exc, TimeoutError):
        error: Exception = redis.TimeoutError(f"no answer from Redis in {CALL_TIMEOUT_S:.0f} s")
    elif isinstance(exc, redis.RedisError):
        error = exc
    else:
        error = redis.ConnectionError(f"Redis call failed mid-batch ({exc!r})")
    for _, future in batch:
        if not future.done():
            future.set_exception(type(error)(*error.args))
