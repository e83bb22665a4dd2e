"""The engine's callback client for synchronous tests (spec/app/delivery/test_callback.py).

It runs the engine's callback client (app/delivery/callback.py) on an event loop of its own,
in a daemon thread, so every safeguard a test checks through it is the engine's own:
there is one callback client in busbar, not one per way of calling it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

from app.delivery.callback import DEFAULT_TIMEOUTS, CallbackClient, Timeouts
from app.models.callback_policy import PRODUCTION, Policy

T = TypeVar("T")


class BlockingClient:
    def __init__(
        self,
        *,
        policy: Policy = PRODUCTION,
        verify: bool | str = True,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
    ) -> None:
        self.policy = policy
        self.timeouts = timeouts
        self.verify = verify
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="callback-client", daemon=True
        )
        self._thread.start()
        self.client: CallbackClient = self.run(self._make())
        # a client nobody closed (a test's) still closes its session and ends its thread
        self._finalizer = weakref.finalize(self, _shut, self._loop, self._thread, self.client)

    async def _make(self) -> CallbackClient:
        return CallbackClient(policy=self.policy, verify=self.verify, timeouts=self.timeouts)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on this client's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def post(self, url: str, body: bytes, headers: dict[str, str], user: str) -> int:
        """POST with HTTP Basic `user:x`, as a delivery does; the status code."""
        return self.run(self.client.exchange(url, body, headers, user)).status

    def close(self) -> None:
        self._finalizer()


def _shut(
    loop: asyncio.AbstractEventLoop, thread: threading.Thread, client: CallbackClient
) -> None:
    if loop.is_closed():
        return
    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(client.close(), loop).result(5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    if not thread.is_alive():
        loop.close()
