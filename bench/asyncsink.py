"""A subscriber process on asyncio, for the benchmarks of thousands of deliveries in
flight at once: bench.sink's ThreadingHTTPServer spends a thread per connection, which
on 2 cores would be the bottleneck (and the noise) long before a worker with 10,000
requests in flight is. One event loop here parses HTTP/1.1 keep-alive by hand (headers,
a Content-Length or chunked body) and costs a coroutine and a socket per connection.

What each path does is set per path prefix (the first prefix that matches wins):
a delay in seconds before `200`, or None for a black hole that reads the request and
never answers; the socket stays open until the worker gives up and closes it. Records
are bench.sink's (arrival ms, path, each event's data["s"]), handed to the parent
through a Pipe, so AsyncSink is a drop-in bench.sink.Sink.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import resource
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from bench.sink import Record, Sink

Rules = list[tuple[str, float | None]]  # (path prefix, answer after s | None: never)
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


class Served:
    """The loop's state; the control thread only swaps `records` and reads counts."""

    def __init__(self, rules: Rules, counter: Any) -> None:
        self.rules, self.counter = rules, counter
        self.records: list[Record] = []
        self.lock = threading.Lock()
        self.open = self.holding = self.waiting = 0  # sockets; in a hole; being served
        self.peaks = {"open": 0, "holding": 0, "in_flight": 0}

    def rule(self, path: str) -> float | None:
        return next((delay for prefix, delay in self.rules if path.startswith(prefix)), 0.0)

    def now(self) -> dict[str, int]:
        return {"open": self.open, "holding": self.holding,
                "in_flight": self.holding + self.waiting}  # fmt: skip

    def note(self) -> None:
        for key, value in self.now().items():
            self.peaks[key] = max(self.peaks[key], value)

    def stats(self) -> dict[str, int]:
        """Now and peak since the last call: sockets open, requests held by holes, and
        requests in flight (held or waiting out their delay: the worker's concurrency)."""
        out = self.now() | {f"peak_{k}": v for k, v in self.peaks.items()}
        self.peaks = dict.fromkeys(self.peaks, 0)
        self.note()
        return out

    async def body(self, reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
        if headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                parts.append(await reader.readexactly(size + 2))
            await reader.readuntil(b"\r\n")  # no trailers are sent to us
            return b"".join(p[:-2] for p in parts)
        return await reader.readexactly(int(headers.get("content-length", "0")))

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One keep-alive connection, request after request, until the client closes."""
        self.open += 1
        self.note()
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (line.partition(":") for line in lines[1:] if line)}  # fmt: skip
                payload = await self.body(reader, headers)
                at = time.time() * 1000
                events = json.loads(payload) if payload else []
                stamps = [(e.get("data") or {}).get("s") for e in events]
                with self.lock:
                    self.records.append((at, path, stamps))
                with self.counter.get_lock():
                    self.counter.value += len(events)
                delay = self.rule(path)
                if delay is None:
                    await self.hold(reader)
                    return
                if delay:
                    self.waiting += 1
                    self.note()
                    try:
                        await asyncio.sleep(delay)
                    finally:
                        self.waiting -= 1
                writer.write(OK)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass  # the client closed: a worker stopped, or gave up on a hole
        finally:
            self.open -= 1
            writer.close()

    async def hold(self, reader: asyncio.StreamReader) -> None:
        """A black hole: no answer; wait for the client to hang up (its timeout)."""
        self.holding += 1
        self.note()
        try:
            while await reader.read(65536):
                pass
        finally:
            self.holding -= 1


def new_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (about half the CPU per request), else asyncio's own."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _serve(control: Connection, counter: Any, rules: Rules, hosts: int) -> None:
    """The subscriber process: the loop in a thread, the parent's requests on this one.
    `hosts`: it listens on 127.0.0.1 up to 127.0.0.<hosts>, one port for all, so a
    worker sees that many origins (each loopback address is one)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    served = Served(rules, counter)
    loop = new_loop()
    started = loop.run_until_complete(
        asyncio.start_server(served.serve, "127.0.0.1", 0, backlog=4096, limit=1 << 20)
    )
    port = started.sockets[0].getsockname()[1]
    if hosts > 1:
        others = [f"127.0.0.{n}" for n in range(2, hosts + 1)]
        loop.run_until_complete(
            asyncio.start_server(served.serve, others, port, backlog=4096, limit=1 << 20)
        )
    threading.Thread(target=loop.run_forever, daemon=True).start()
    control.send(port)
    while (asked := control.recv()) != "stop":
        if asked == "stats":
            control.send(asyncio.run_coroutine_threadsafe(_now(served.stats), loop).result())
        else:  # "take"
            with served.lock:
                taken, served.records = served.records, []
            control.send(taken)


async def _now(call: Any) -> Any:
    """`call` run on the loop's thread, so counts are read between two of its steps."""
    return call()


class AsyncSink(Sink):
    """bench.sink.Sink's interface (port, received, wait_for, take, stop) and stats()."""

    def __init__(self, rules: Rules, hosts: int = 1) -> None:
        """`hosts`: the loopback addresses it listens on, 127.0.0.1 to 127.0.0.<hosts>
        (at most 254), all on `port`."""
        if not 1 <= hosts <= 254:
            raise ValueError(f"hosts: 1 to 254, not {hosts}")
        ctx = mp.get_context("spawn")
        self._counter = ctx.Value("q", 0)
        self._control, child = ctx.Pipe()
        self.process = ctx.Process(
            target=_serve, args=(child, self._counter, rules, hosts), daemon=True
        )
        self.process.start()
        child.close()  # the child's end is the child's: its exit ends the recv below
        try:
            self.port: int = self._control.recv()
        except EOFError:
            self.process.join(5)
            raise RuntimeError(
                f"the sink process ended before it listened (exit {self.process.exitcode})"
            ) from None

    def stats(self) -> dict[str, int]:
        """Sockets open and requests held or in flight, now and at peak since last asked."""
        self._control.send("stats")
        return self._control.recv()
