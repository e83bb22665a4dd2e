"""EVALSHA after a Redis restart: the one place a script missing from the server's cache
is loaded and called again.

Every script is called by its SHA1 (EVALSHA), never with its text. A server that
restarted, or ran SCRIPT FLUSH, answers NOSCRIPT: the script did not run, so loading
it and calling it once more is no replay. Each way busbar sends a call (redis-py's
command path, the web's kept connection in held.py, the engine's pipe, a pipeline of
upkeep calls) passes its call and its load here, sync or asyncio.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from redis.exceptions import NoScriptError

T = TypeVar("T")


def loaded(call: Callable[[], T], load: Callable[[], object]) -> T:
    """`call`'s reply; on NOSCRIPT, `load`, then `call` once more."""
    try:
        return call()
    except NoScriptError:
        load()
        return call()


async def loaded_async(
    call: Callable[[], Awaitable[T]], load: Callable[[], Awaitable[object]]
) -> T:
    """loaded() on the event loop."""
    try:
        return await call()
    except NoScriptError:
        await load()
        return await call()
