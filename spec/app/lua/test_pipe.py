"""The engine's pipelined script calls (app/lua/pipe.py), on a real server: many calls at
once share a few connections and each gets its own reply; an error reply fails only its
call; a lost connection fails the calls it carried, never answers them wrongly, and the
next call goes through on a new one."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Callable

import hiredis
import pytest
import redis
import redis.asyncio

from app.lua import AsyncScripts
from app.lua import pipe as pipe_module
from app.lua.pipe import Pipe
from app.models import job_calls
from app.models.keys import Keys
from app.redis_client import connect_async
from config.settings import Settings
from dev import redis_server
from spec.app.test_redis_client import proxied

PLACE = Keys("pipe-test:", 1).catalog
ECHO = "return ARGV[1]"


def connections_made(redis_client: redis.Redis) -> int:
    return int(redis_client.info("stats")["total_connections_received"])


Echo = Callable[[object], bytes]  # a packed EVALSHA of a script that answers its argument


@contextlib.asynccontextmanager
async def echo_pipe(url: str, connections: int) -> AsyncIterator[tuple[Pipe, Echo]]:
    client = connect_async(Settings(redis_url=url), connections=connections + 2)
    scripts = AsyncScripts(client, connections)
    try:
        sha = await client.script_load(ECHO)
        assert scripts.pipe is not None
        yield scripts.pipe, lambda arg: hiredis.pack_command(("EVALSHA", sha, 0, arg))
    finally:
        await scripts.close()
        await client.aclose()


def test_a_thousand_calls_at_once_share_two_connections(redis_url: str, redis_client):
    before = connections_made(redis_client)

    async def main() -> list[bytes]:
        async with echo_pipe(redis_url, 2) as (pipe, echo):
            return list(await asyncio.gather(*(pipe.call(echo(n)) for n in range(1000))))

    assert asyncio.run(main()) == [str(n).encode() for n in range(1000)]
    # two for the calls, one for SCRIPT LOAD: not one per call
    assert connections_made(redis_client) - before <= 3


def test_an_error_reply_fails_its_own_call_only(redis_url: str):
    async def main() -> list[object]:
        async with echo_pipe(redis_url, 1) as (pipe, echo):
            nosuch = hiredis.pack_command(("EVALSHA", "0" * 40, 0))
            calls = [pipe.call(echo("a")), pipe.call(nosuch), pipe.call(echo("c"))]
            return await asyncio.gather(*calls, return_exceptions=True)

    first, second, third = asyncio.run(main())
    assert (first, third) == (b"a", b"c")
    assert isinstance(second, redis.exceptions.NoScriptError)


def test_a_script_the_server_lost_is_loaded_again_and_run(redis_url: str, redis_client):
    """After a restart (its script cache empty) a call loads the script and runs it once."""

    async def main() -> int:
        client = connect_async(Settings(redis_url=redis_url), connections=4)
        scripts = AsyncScripts(client, 2)
        try:
            await client.script_flush()
            return await scripts.run(job_calls.heartbeat(Keys("pipe-test:", 1).catalog, "w1"))
        finally:
            await scripts.close()
            await client.aclose()

    stamped = asyncio.run(main())
    assert int(redis_client.hget(PLACE.workers, "w1")) == stamped
    redis_client.delete(PLACE.workers)


def test_a_lost_reply_fails_the_call_and_the_next_goes_through(redis_url: str):
    """The reply to a call is cut: the caller gets a connection error (it may have run;
    nothing answers it falsely), and the next call succeeds on a new connection."""
    with proxied(redis_url, trigger=b"lost-reply") as proxy:

        async def main() -> tuple[BaseException | None, bytes]:
            async with echo_pipe(f"redis://127.0.0.1:{proxy.port}/0", 1) as (pipe, echo):
                error = None
                try:
                    await pipe.call(echo("lost-reply"))
                except redis.ConnectionError as exc:
                    error = exc
                return error, await pipe.call(echo("after"))

        error, after = asyncio.run(main())
    assert isinstance(error, redis.ConnectionError)
    assert after == b"after"


def test_a_batch_without_an_answer_times_out(redis_url: str, monkeypatch: pytest.MonkeyPatch):
    """A server that takes the calls and never answers: each call fails with a Redis
    timeout once the batch's time is up, instead of waiting for ever."""
    monkeypatch.setattr(pipe_module, "CALL_TIMEOUT_S", 0.5)

    async def main() -> list[object]:
        server = await asyncio.start_server(lambda _r, _w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        settings = Settings(redis_url=f"redis://127.0.0.1:{port}/0")
        client = connect_async(settings, connections=2, timeout=0.5)  # the handshake too
        scripts = AsyncScripts(client, 1)
        pipe = scripts.pipe
        assert pipe is not None
        try:
            return await asyncio.gather(
                *(pipe.call(b"*1\r\n$4\r\nPING\r\n") for _ in range(3)), return_exceptions=True
            )
        finally:
            await scripts.close()
            await client.aclose()
            server.close()

    results = asyncio.run(main())
    assert all(isinstance(r, redis.TimeoutError) for r in results), results


@pytest.mark.parametrize("restarts", ["sigterm", "kill -9"])
def test_a_call_after_redis_restarted_goes_on_a_new_connection_once(tmp_path, restarts: str):
    """Redis restarts while the pipe's connection is idle: the next call is not written to
    the dead connection and failed (which made a delivery acknowledged by its subscriber
    be sent again: its settle failed, its job was given back); it goes on a new
    connection, runs once, and answers."""
    port = redis_server.free_port()
    server = redis_server.start(tmp_path / "a", port=port, persistent=False)
    incr = hiredis.pack_command(("INCR", "pipe-test:count"))

    async def main() -> tuple[object, object]:
        nonlocal server
        client = connect_async(Settings(redis_url=server.url), connections=3)
        the_pipe = Pipe(client, 1)
        try:
            before = await the_pipe.call(incr)
            if restarts == "sigterm":
                server.stop()
            else:
                os.kill(server.process.pid, signal.SIGKILL)
                server.process.wait()
            server = redis_server.start(tmp_path / "b", port=port, persistent=False)
            await asyncio.sleep(0.3)  # the old connection's end has come by now
            return before, await the_pipe.call(incr)
        finally:
            await the_pipe.close()
            await client.aclose()

    try:
        assert asyncio.run(main()) == (1, 1)  # ran once on the new server, and answered
        with redis.Redis(port=port) as fresh:
            assert int(fresh.get("pipe-test:count") or 0) == 1
    finally:
        server.stop()
