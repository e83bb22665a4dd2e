"""When messages reached a RabbitMQ queue: its depth polled on a thread of its own.

RabbitMQ (3.10, Debian's) stamps no message with when it stored it, as JetStream does,
and a consumer taking messages as they come would change what is measured (a durable
queue with a consumer may confirm a persistent message without writing it). So the
queue is left alone and its depth read every POLL_S (a passive queue.declare, on a
connection of its own, a fraction of a millisecond of the broker's time): when each
count was first seen, within POLL_S of when it was reached. The connection is opened
again after the broker was killed and restarted; the first count read on a new
connection is not taken for an arrival (the broker recovered it from its store).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import threading
import time

import aio_pika

POLL_S = 0.02


class Depth(threading.Thread):
    def __init__(self, url: str, queue: str) -> None:
        super().__init__(daemon=True)
        self.url, self.queue = url, queue
        self.seen: list[tuple[float, int]] = []  # (epoch s, depth) when it changed
        self.rises: list[float] = []  # when a new depth above the last was first read
        self.stopping = threading.Event()
        self.start()

    @property
    def count(self) -> int:
        return self.seen[-1][1] if self.seen else 0

    def reached(self, n: int) -> float:
        """When a depth of `n` or more was first read."""
        found = next((at for at, depth in self.seen if depth >= n), None)
        if found is None:
            raise RuntimeError(f"{self.queue} never held {n} messages")
        return found

    def rises_since(self, since: float) -> list[float]:
        return self.rises[bisect.bisect_left(self.rises, since) :]

    def stop(self) -> None:
        self.stopping.set()
        self.join(10)

    def run(self) -> None:
        asyncio.run(self._poll())

    async def _poll(self) -> None:
        while not self.stopping.is_set():
            with contextlib.suppress(Exception):  # refused while the broker is down
                await self._connected()
            await asyncio.sleep(0.05)

    async def _connected(self) -> None:
        connection = await aio_pika.connect(self.url, timeout=1)
        try:
            channel = await connection.channel()
            last = None
            while not self.stopping.is_set():
                declared = await channel.declare_queue(self.queue, passive=True, timeout=1)
                depth = declared.declaration_result.message_count or 0
                now = time.time()
                if last is not None and depth > last:
                    self.rises.append(now)
                if not self.seen or depth != self.seen[-1][1]:
                    self.seen.append((now, depth))
                last = depth
                await asyncio.sleep(POLL_S)
        finally:
            with contextlib.suppress(Exception):
                await connection.close()
