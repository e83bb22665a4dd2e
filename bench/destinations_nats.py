"""NATS JetStream as bench.destinations measures it (a Target of bench.destinations_bus):
the venv's nats-server with JetStream, started as spec/nats_server.py starts it
(loopback, its file store in a temporary folder), and this process's side of it: one
event loop and one connection, opened again after the broker was restarted.

Measurement `n` has its stream `S<n>` capturing `s<n>.>`, and its subscriber's
destination publishes to subject `s<n>.{type}.{key}` with `stream` `S<n>`. When a
message was stored is JetStream's own timestamp of it; the baseline publishes with
nats-py, `js.publish` awaiting each PubAck in a plain loop, as the worker does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext

from bench.destinations_bus import MAX_1, MAX_100, Stored
from spec.nats_server import NatsServer

T = TypeVar("T")


class Nats:
    name = "NATS JetStream"
    baseline = "nats-py loop (baseline)"

    def __init__(self, server: NatsServer) -> None:
        self.baselines = {MAX_1: self.baseline, MAX_100: self.baseline}  # one for both
        self.server = server
        self.loop = asyncio.new_event_loop()
        self.client: Client | None = None

    def run(self, work: Callable[[JetStreamContext], Awaitable[T]]) -> T:
        return self.loop.run_until_complete(self._run(work))

    async def _run(self, work: Callable[[JetStreamContext], Awaitable[T]]) -> T:
        if self.client is None or not self.client.is_connected:
            await self._drop()
            self.client = await nats.connect(
                self.server.url, allow_reconnect=False, error_cb=_quiet,
                disconnected_cb=_nothing, closed_cb=_nothing,
            )  # fmt: skip
        return await work(self.client.jetstream())

    async def _drop(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            with contextlib.suppress(Exception):  # the broker may be gone
                await client.close()

    def close(self) -> None:
        self.loop.run_until_complete(self._drop())
        self.loop.close()

    def pid(self) -> int:
        assert self.server.process is not None
        return self.server.process.pid

    def fresh(self, n: int) -> None:
        self.run(lambda js: js.add_stream(name=f"S{n}", subjects=[f"s{n}.>"]))

    def destination(self, n: int) -> dict[str, Any]:
        return {"type": "nats", "url": self.server.url, "subject": f"s{n}.{{type}}.{{key}}",
                "stream": f"S{n}"}  # fmt: skip

    def remove(self, n: int) -> None:
        self.run(lambda js: js.delete_stream(f"S{n}"))

    def count(self, n: int) -> int:
        async def messages(js: JetStreamContext) -> int:
            return (await js.stream_info(f"S{n}")).state.messages

        return self.run(messages)

    def span(self, n: int, count: int) -> tuple[float, float]:
        """When the stream's first and last messages were stored (it holds `count`)."""
        del count  # the stream's last is its count-th

        async def ends(js: JetStreamContext) -> tuple[float, float]:
            state = (await js.stream_info(f"S{n}")).state
            got = [await js.get_msg(f"S{n}", s) for s in (state.first_seq, state.last_seq)]
            return stamp(got[0].time), stamp(got[1].time)

        return self.run(ends)

    def read(self, n: int) -> list[Stored]:
        """Every message of the stream, in stream order."""

        async def every(js: JetStreamContext) -> list[Stored]:
            state = (await js.stream_info(f"S{n}")).state
            found: list[Stored] = []
            if not state.messages:
                return found
            seqs = list(range(state.first_seq, state.last_seq + 1))
            for at in range(0, len(seqs), 500):
                got = await asyncio.gather(*(js.get_msg(f"S{n}", s) for s in seqs[at : at + 500]))
                found += [
                    Stored(m.seq or 0, m.subject or "", (m.headers or {}).get("Nats-Msg-Id", ""),
                           m.data or b"", stamp(m.time), {}) for m in got
                ]  # fmt: skip
            return found

        return self.run(every)

    def publish_loop(self, n: int, messages: list[Stored], baseline: str = "") -> float:
        """The baseline: each message published to S<n> (its subject's first token made
        `s<n>`) and its PubAck awaited before the next, as the worker does, with the
        same headers. Returns this thread's CPU seconds."""
        del baseline  # one baseline: the worker sends one message at a time either way
        sent = [(f"s{n}." + m.subject.split(".", 1)[1], m.msg_id, m.data) for m in messages]

        async def loop(js: JetStreamContext) -> None:
            for subject, msg_id, body in sent:
                headers = {"Nats-Msg-Id": msg_id, "Content-Type": "application/json"}
                await js.publish(subject, body, timeout=20, stream=f"S{n}", headers=headers)

        began = time.thread_time()
        self.run(loop)
        return time.thread_time() - began

    def kill(self) -> None:
        self.loop.run_until_complete(self._drop())
        self.server.kill()

    def restart(self) -> None:
        self.server.start()  # the same port and store: an operator's restart

    def arrivals(self, n: int, held: list[Stored], since: float) -> tuple[float, float]:
        """When the first message at or after `since`, and the last, were stored."""
        del n  # the stamps are in the messages
        return min((m.at for m in held if m.at >= since), default=since), max(m.at for m in held)


def stamp(at: Any) -> float:
    return float(at.timestamp()) if at is not None else 0.0


async def _quiet(_: Exception) -> None:
    """nats-py logs every error of a connection at error level without a callback."""


async def _nothing() -> None:
    return None


@contextlib.contextmanager
def nats_broker(work: Path) -> Iterator[Nats]:
    """A nats-server with its store under `work`, and this process's side of it; killed
    on the way out."""
    store = work / "jetstream"
    store.mkdir()
    server = NatsServer(store)
    server.start()
    try:
        with contextlib.closing(Nats(server)) as broker:
            yield broker
    finally:
        server.kill()
