"""Many subscribers at once, for the delivery engine's tests: one asyncio server (in a
thread of the test process) answering every path. A path under /hole/ accepts the
request and never answers (the connection is held until the server stops); any other
path answers 204 after `delay` seconds. It counts the requests in flight at once, which
a thread-per-delivery worker could never push past its thread count."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

# The crowd stands for many subscribers' own servers, each its own origin: one worker
# may open as many connections to it as there are deliveries (app/delivery/gate.py).
MANY_ORIGINS = {"BUSBAR_ORIGIN_CONNECTIONS": "100000", "BUSBAR_ORIGIN_CONNECTING": "10000"}


@dataclass
class Crowd:
    delay: float = 0.0
    port: int = 0
    arrivals: dict[str, list[float]] = field(default_factory=dict)  # path -> time.time()
    in_flight: int = 0
    max_in_flight: int = 0
    holes_held: int = 0  # requests to holes, ever
    holes_open: int = 0  # requests to holes the client has not given up yet
    stop: asyncio.Event | None = None  # set when the server stops: holes let go then

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _hold(self, reader: asyncio.StreamReader) -> None:
        """Until the client hangs up or the server stops."""
        assert self.stop is not None
        hung_up = asyncio.ensure_future(reader.read(1))
        stopped = asyncio.ensure_future(self.stop.wait())
        try:
            await asyncio.wait({hung_up, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            hung_up.cancel()
            stopped.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                length = next(
                    (
                        int(h.split(":", 1)[1])
                        for h in lines
                        if h.lower().startswith("content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                self.arrivals.setdefault(path, []).append(time.time())
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                if path.startswith("/hole/"):
                    self.holes_held += 1
                    self.holes_open += 1
                    try:
                        await self._hold(reader)  # never answers
                    finally:
                        self.holes_open -= 1
                    return
                if self.delay:
                    await asyncio.sleep(self.delay)
                self.in_flight -= 1
                writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@contextmanager
def crowd(delay: float = 0.0) -> Iterator[Crowd]:
    the_crowd = Crowd(delay)
    loop = asyncio.new_event_loop()
    started = threading.Event()

    async def main() -> None:
        the_crowd.stop = asyncio.Event()
        server = await asyncio.start_server(the_crowd._serve, "127.0.0.1", 0, backlog=4096)
        the_crowd.port = server.sockets[0].getsockname()[1]
        started.set()
        async with server:
            await the_crowd.stop.wait()
        await asyncio.sleep(0.1)  # the holes let go
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()

    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    started.wait(5)
    try:
        yield the_crowd
    finally:
        assert the_crowd.stop is not None
        loop.call_soon_threadsafe(the_crowd.stop.set)
        thread.join(5)
