"""Registry of the Lua scripts in this folder: every multi-key change is one of them.

Each `*.lua` file starts with a header naming its KEYS and ARGV; the registry refuses a
file without one, so a script's contract is always written next to its code. A header
line `-- USES a b` prepends `lib/a.lua` then `lib/b.lua` (only the functions the script
calls, prelude.py says why): Lua scripts cannot call each other, and this keeps logic
several scripts share (the job state machine, the batch bookkeeping) in one place. Each
script is called with EVALSHA and loaded again after a Redis restart (NOSCRIPT): that
reload is not a replay, the script never ran.

Modules (docs/layout.md is the whole map; spec/test_map.py keeps both true):

    call.py             one script call (name, KEYS, ARGV, how its reply reads): the only way
    held.py             publish's topic step on a connection each web thread keeps
    pipe.py             the engine's calls pipelined over a few connections, WAIT there
    noscript.py         EVALSHA after a restart: a script the server lacks loaded, called again
    prelude.py          what a script's libraries put before it: only what it calls
    replicated.py       BUSBAR_REDIS_MIN_REPLICAS for the engine's calls on a cluster
    lib/                Lua the scripts share, prepended: jobs.lua (the job state machine),
                        batches, delivery, acks, ingest, partitions, places, operations,
                        filters, schemas, names, erasure
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import hiredis
import redis
import redis.asyncio
from redis.exceptions import NoScriptError

from app.errors import BusbarError
from app.lua import prelude
from app.lua.call import Call, R
from app.lua.noscript import loaded, loaded_async
from app.lua.pipe import CALL_TIMEOUT_S, Pipe
from app.lua.replicated import ClusterWait, Unconfirmed
from app.models.keys import lua_constants
from app.redis_client import is_cluster


def header(text: str) -> list[str]:
    """The leading comment block of a script: where its KEYS and ARGV are written."""
    lines = text.lstrip().splitlines()
    end = next((i for i, line in enumerate(lines) if not line.startswith("--")), len(lines))
    return lines[:end]


def _read(relative: str) -> str:
    path = resources.files(__package__).joinpath(relative)
    if not path.is_file():
        raise BusbarError(f"no Lua library {relative}")
    return path.read_text(encoding="utf-8")


# The libraries in the order they must be prepended (a Lua local function is only seen
# by code after it): batches needs partitions (the context of a subscriber's partition,
# and the drain after a change of concurrency), which makes jobs due, so needs jobs.
PIPELINED = 500  # calls a pipeline of run_many() carries at most

_LIBRARY_ORDER = (
    "jobs", "partitions", "places", "batches", "ingest", "delivery", "operations", "acks",
    "shaping", "filters", "schemas", "names", "erasure",
)  # fmt: skip


def _libraries(named: list[str]) -> list[str]:
    wanted = set(named) | ({"jobs", "partitions"} if "batches" in named else set())
    wanted |= {"places"} if "delivery" in named else set()
    unknown = wanted - set(_LIBRARY_ORDER)
    if unknown:
        raise BusbarError(f"no Lua library {sorted(unknown)[0]}")
    return [lib for lib in _LIBRARY_ORDER if lib in wanted]


def _sources() -> dict[str, str]:
    found: dict[str, str] = {}
    for entry in resources.files(__package__).iterdir():
        if entry.name.endswith(".lua"):
            text = entry.read_text(encoding="utf-8")
            head = header(text)
            if not any(line.startswith("-- KEYS") for line in head) or not any(
                line.startswith("-- ARGV") for line in head
            ):
                raise BusbarError(f"{entry.name} lacks its '-- KEYS' / '-- ARGV' header")
            libs = _libraries(
                [n for line in head if line.startswith("-- USES ") for n in line.split()[2:]]
            )
            defined = [prelude.definitions(lib, _read(f"lib/{lib}.lua")) for lib in libs]
            found[entry.name.removesuffix(".lua")] = (
                lua_constants() + prelude.prelude(defined, text) + text
            )
    return found


@dataclass(frozen=True)
class LuaScript:
    """One script on one client: EVALSHA, and SCRIPT LOAD when the server lacks it.

    redis-py's own Script object does the same through its generic command layer
    (argument deprecation checks, a callable per call), which cost a delivering worker
    more CPU than the script itself; this calls the command directly."""

    client: redis.Redis
    text: str
    sha: str

    def __call__(
        self,
        keys: Sequence[Any] = (),
        args: Sequence[Any] = (),
        client: redis.Redis | None = None,
    ) -> Any:
        target = client or self.client
        command = ("EVALSHA", self.sha, len(keys), *keys, *args)
        return loaded(
            lambda: target.execute_command(*command),  # type: ignore[no-untyped-call]  # redis-py: untyped
            lambda: target.script_load(self.text),
        )


@dataclass(frozen=True)
class AsyncLuaScript:
    """LuaScript for redis-py's asyncio client (the delivery engine's event loop).

    On one Redis the call is packed by hiredis (redis-py's asyncio packer is Python: 31
    against 4 µs for a sweep's 49 arguments) and goes through the engine's Pipe, which
    writes the calls of one turn of the loop together (app/lua/pipe.py). On a cluster
    the client's own command path follows MOVED and ASK, `gate` calls at a time."""

    client: redis.asyncio.Redis
    text: str
    sha: str
    gate: asyncio.Semaphore
    pipe: Pipe | None  # None on a cluster
    replicated: ClusterWait | None = None  # a cluster's BUSBAR_REDIS_MIN_REPLICAS

    async def __call__(self, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Any:
        reply, _ = await self.confirmed(keys, args)
        return reply

    async def confirmed(
        self, keys: Sequence[Any] = (), args: Sequence[Any] = ()
    ) -> tuple[Any, bool]:
        """The reply, and whether BUSBAR_REDIS_MIN_REPLICAS replicas were seen to hold
        what the call wrote (always, with the setting off): a delivery is sent only from
        a begin they hold (app/delivery/steps.py)."""
        command = ("EVALSHA", self.sha, len(keys), *keys, *args)
        if self.pipe is None:
            async with self.gate, client_errors():
                if self.replicated is not None and keys:  # the call and WAIT, one trip
                    answered = await self.replicated.call(command, keys[0])
                    if answered is not None:
                        return answered
                reply = await loaded_async(
                    lambda: self.client.execute_command(*command),  # type: ignore[no-untyped-call]  # redis-py: untyped
                    lambda: self.client.script_load(self.text),
                )
                if self.replicated is not None and keys:
                    return reply, await self.replicated.after(keys[0])
                return reply, True
        pipe, packed = self.pipe, hiredis.pack_command(command)
        # the load goes through the pipe, as the call: a pooled connection the server
        # closed when it restarted (which is when a script is missing) would fail the
        # load, and the settle with it (app/lua/pipe.py's closed_by_server)
        reply = await loaded_async(lambda: pipe.call(packed), lambda: pipe.call(self._load()))
        if isinstance(reply, Unconfirmed):
            return reply.reply, False
        return reply, True

    def _load(self) -> bytes:
        """SCRIPT LOAD of this script, packed: only after a NOSCRIPT."""
        load: tuple[Any, ...] = ("SCRIPT", "LOAD", self.text)
        packed: bytes = hiredis.pack_command(load)
        return packed


@contextlib.asynccontextmanager
async def client_errors() -> AsyncIterator[None]:
    """redis-py's asyncio cluster client (8.1) can fail a command with AttributeError,
    TypeError or RuntimeError when a connection it closed is used by another coroutine:
    seen here with 200 concurrent commands at a cold start (its topology being built),
    and after a worker was stopped (SIGSTOP) and continued (uvloop: "unable to perform
    operation on <TCPTransport closed=True>"). Such a command may or may not have
    reached Redis, exactly as with a lost connection, so it is reported as one; the
    engine then does what it does for any Redis error (the slot gives back its own
    pending lists)."""
    try:
        yield
    except TimeoutError as exc:  # CALL_TIMEOUT_S: asyncio's, not redis-py's
        raise redis.TimeoutError(f"no answer from Redis in {CALL_TIMEOUT_S:.0f} s") from exc
    except (AttributeError, TypeError, RuntimeError) as exc:
        raise redis.ConnectionError(f"Redis client failed mid-command ({exc!r})") from exc


@functools.cache
def _shas() -> dict[str, tuple[str, str]]:
    """Read and pruned once a process (app/lua/prelude.py: 20 ms), not at each Scripts:
    a test that made 2,000 clients, a Scripts each, went from 20 s to past its 120."""
    return {
        name: (text, hashlib.sha1(text.encode()).hexdigest()) for name, text in _sources().items()
    }


class AsyncScripts:
    """The scripts on an asyncio client, run by their builders' calls (run(call)), as
    Scripts. `calls`: how many may be under way at once (the client's connections)."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        calls: int,
        replicas: int = 0,
        replica_timeout_ms: int = 1000,
    ) -> None:
        """`replicas`: BUSBAR_REDIS_MIN_REPLICAS, waited for after each call: by the
        pipe's WAIT on one Redis, by a fence and WAIT on the call's node on a cluster."""
        self.gate = asyncio.Semaphore(calls)
        cluster = is_cluster(client)
        self.pipe = None if cluster else Pipe(client, calls, replicas, replica_timeout_ms)
        waits = None
        if cluster and replicas:
            waits = ClusterWait(client, replicas, replica_timeout_ms)  # type: ignore[arg-type]  # is_cluster said so
        self._scripts = {
            name: AsyncLuaScript(client, text, sha, self.gate, self.pipe, waits)
            for name, (text, sha) in _shas().items()
        }

    async def close(self) -> None:
        if self.pipe is not None:
            await self.pipe.close()

    async def run(self, call: Call[R]) -> R:
        """A builder's call (app/lua/call.py): its script with its KEYS and ARGV, and its
        reply as the builder reads it."""
        return call.read(await self._scripts[call.script](keys=call.keys, args=call.args))

    async def confirmed(self, call: Call[R]) -> tuple[R, bool]:
        """run(), and whether BUSBAR_REDIS_MIN_REPLICAS replicas hold what it wrote
        (AsyncLuaScript.confirmed)."""
        reply, ok = await self._scripts[call.script].confirmed(keys=call.keys, args=call.args)
        return call.read(reply), ok


class Scripts:
    """The scripts, registered on one client, run by their builders' calls (run(call))."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._scripts: dict[str, LuaScript] = {
            name: LuaScript(client, text, sha) for name, (text, sha) in _shas().items()
        }

    def run(self, call: Call[R], client: redis.Redis | None = None) -> R:
        """A builder's call (app/lua/call.py): its script with its KEYS and ARGV (on
        `client`, a pipeline say, instead of the registry's own), and its reply as the
        builder reads it."""
        reply = self._scripts[call.script](keys=call.keys, args=call.args, client=client)
        return call.read(reply)

    def run_many(self, calls: Sequence[Call[R]]) -> list[R]:
        """Each call's reply, in order, the calls sent PIPELINED to a pipeline (not a
        transaction: each script is atomic on its own, and on a cluster each goes to its
        own keys' node). For upkeep that steps every subscriber: a round trip per call
        through redis-py's command layer cost Expire 0.8 s of the worker's GIL every
        10 s with 11,000 subscribers, beside the delivery loop (docs/performance.md)."""
        replies: list[R] = []
        for start in range(0, len(calls), PIPELINED):
            chunk = calls[start : start + PIPELINED]
            pipe = self._client.pipeline(transaction=False)
            for call in chunk:
                sha = self._scripts[call.script].sha
                pipe.execute_command("EVALSHA", sha, len(call.keys), *call.keys, *call.args)  # type: ignore[no-untyped-call]  # redis-py: untyped
            for call, reply in zip(chunk, pipe.execute(raise_on_error=False), strict=True):
                if isinstance(reply, NoScriptError):  # never ran: load it, run it alone
                    reply = self._scripts[call.script](call.keys, call.args)
                elif isinstance(reply, Exception):
                    raise reply
                replies.append(call.read(reply))
        return replies

    def loaded(self, name: str) -> LuaScript:
        """The script itself, for a caller that sends it its own way (app/lua/held.py)."""
        return self._scripts[name]

    def names(self) -> list[str]:
        return sorted(self._scripts)
