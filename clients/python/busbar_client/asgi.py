"""An ASGI receiver: an ASGI app of its own (uvicorn, hypercorn...), and a route endpoint
for Starlette and FastAPI (`Route(path, receiver, methods=["POST"])`, or FastAPI's
`app.add_route(path, receiver, methods=["POST"])`). Neither is imported here.

An `async def` handler is awaited; a plain function runs in a worker thread, so a slow
one never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from busbar_client.receiver import MAX_BODY, Receiver, Reply

log = logging.getLogger("busbar_client")
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class AsgiReceiver(Receiver):
    async def process(self, headers: dict[str, str], body: bytes) -> Reply:
        admitted = self.admit(headers, body)
        if isinstance(admitted, Reply):
            return admitted
        try:
            if inspect.iscoroutinefunction(self.handler):
                await self.handler(admitted)
            else:
                await asyncio.to_thread(self.handler, admitted)
        except Exception:
            log.exception("busbar delivery %s: the handler raised", admitted.webhook_id)
            return self.settle(admitted, ok=False)
        return self.settle(admitted, ok=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # served on its own: nothing to start or stop
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":
            await _answer(send, Reply(405, "busbar delivers with POST"))
            return
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > MAX_BODY:
                await _answer(send, Reply(413, "the body is too large"))
                return
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        await _answer(send, await self.process(headers, bytes(body)))


async def _answer(send: Send, reply: Reply) -> None:
    body = reply.body()
    headers = [(b"content-length", str(len(body)).encode())]
    if body:
        headers.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
