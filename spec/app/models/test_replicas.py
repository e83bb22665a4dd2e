"""BUSBAR_REDIS_MIN_REPLICAS on a real server and its real replica: a write is answered
once the replica holds it, and a write short of replicas is a 503 that undoes nothing.
Short of replicas is made two ways: asking for more than exist, and a replica stopped
(SIGSTOP) under the write."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import pytest
import redis
import redis.asyncio

from app.errors import NotReplicated
from app.lua import AsyncScripts
from app.models import job_calls
from app.models.keys import keys_for
from app.models.replicas import Replicas
from app.web import create_app
from config.settings import Settings
from dev import redis_server
from spec.conftest import ROOT_KEY
from spec.integration.processes import stop, wait_until

TIMEOUT_MS = 200


@pytest.fixture(scope="module")
def pair(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, redis_server.RedisServer]]:
    """A primary and one replica of it: the primary's URL, and the replica's server."""
    with redis_server.replicated(tmp_path_factory.mktemp("replicated")) as (primary, replica):
        yield primary.url, replica


@pytest.fixture
def client(pair: tuple[str, redis_server.RedisServer]) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(pair[0]) as found:
        found.flushall()
        yield found


def settings(url: str, replicas: int) -> Settings:
    return Settings(
        redis_url=url, root_key=ROOT_KEY, redis_min_replicas=replicas,
        redis_replica_timeout_ms=TIMEOUT_MS,
    )  # fmt: skip


@contextmanager
def stopped(server: redis_server.RedisServer) -> Iterator[None]:
    stop(server.process.pid)
    try:
        yield
    finally:
        os.kill(server.process.pid, signal.SIGCONT)


def basic(token: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{token}:".encode()).decode()}


def waits(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))


def test_a_write_is_confirmed_once_its_replica_holds_it(pair, client):
    """A timeout of its own, ten times the others': a replica just started answers its
    first WAIT later under load (Redis 7.0 beside three other test processes missed
    200 ms), and what is asserted is that the barrier returns once the replica holds the
    write, not when the time runs out."""
    given = dataclasses.replace(settings(pair[0], 1), redis_replica_timeout_ms=10 * TIMEOUT_MS)
    replicas = Replicas(client, keys_for(given), given)
    client.set("written", "1")
    started = time.monotonic()
    replicas.confirm()
    assert time.monotonic() - started < 10 * TIMEOUT_MS / 1000  # no wait out: it has it
    with redis.Redis(port=pair[1].port) as replica:
        assert replica.get("written") == b"1"  # the write before the barrier, on the replica


def test_short_of_replicas_is_not_replicated_and_undoes_nothing(pair, client):
    for asked, server_stopped in ((2, False), (1, True)):  # more than exist; one stopped
        given = settings(pair[0], asked)
        client.set("written", str(asked))
        started = time.monotonic()
        with (
            pytest.raises(NotReplicated) as refused,
            stopped(pair[1]) if server_stopped else nullcontext(),
        ):
            Replicas(client, keys_for(given), given).confirm()
        took = time.monotonic() - started
        assert TIMEOUT_MS / 1000 <= took < TIMEOUT_MS / 1000 + 2, took
        assert "BUSBAR_REDIS_MIN_REPLICAS" in refused.value.message
        assert refused.value.delay_ms == 1000
        assert client.get("written") == str(asked).encode()  # written, and it stays


def test_off_the_barrier_costs_nothing(pair, client):
    before = waits(client)
    Replicas(client, keys_for(settings(pair[0], 0)), settings(pair[0], 0)).confirm()
    assert waits(client) == before
    assert client.keys("*fence*") == []


def test_a_barrier_for_no_place_waits_on_nothing(pair, client):
    """A publish of `[]` wrote nothing: its barrier sends nothing, even short of replicas."""
    given = settings(pair[0], 1)
    before = waits(client)
    with stopped(pair[1]):
        Replicas(client, keys_for(given), given).confirm([])
    assert waits(client) == before


def test_the_api_answers_a_write_short_of_replicas_503_and_keeps_it(pair, client):
    root, shop = basic(ROOT_KEY), basic("shop-token-1")
    short = create_app(settings(pair[0], 2)).test_client()
    response = short.post("/api_tokens", json={"name": "shop", "token": "shop-token-1"},
                          headers=root)  # fmt: skip
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"
    assert "BUSBAR_REDIS_MIN_REPLICAS" in response.get_json()["error"]
    # the create was written: the same request again is a success, also short
    assert client.hget(keys_for(settings(pair[0], 2)).tokens, "shop-token-1") == b"shop"
    publish = short.post("/topics/orders", json=[{"type": "create", "url": "https://s.test/1"}],
                         headers=shop)  # fmt: skip
    assert publish.status_code == 503  # the fast path's 204 waits too
    assert short.get("/health").status_code == 200  # a read does not wait
    # held: the replica acknowledges, within a wait longer than the 200 ms above (make
    # test's load once kept it from doing so in 200 ms: a 503, 2026-12-01)
    held_settings = dataclasses.replace(settings(pair[0], 1), redis_replica_timeout_ms=2000)
    held = create_app(held_settings).test_client()
    publish = held.post("/topics/orders", json=[{"type": "create", "url": "https://s.test/2"}],
                        headers=shop)  # fmt: skip
    assert publish.status_code == 204
    refused = held.post("/topics/orders", json="not a list",
                        headers=shop)  # fmt: skip
    assert refused.status_code == 400  # an error wrote nothing: no wait, its own answer


def test_the_engines_settles_wait_for_their_replica(pair, client, caplog):
    """The delivery engine's pipe ends each write with WAIT: a call is answered after
    its replica holds it; short of replicas, after the timeout, with a warning."""

    async def call_with(replicas: int) -> tuple[object, float]:
        engine_client = redis.asyncio.Redis.from_url(pair[0])
        scripts = AsyncScripts(engine_client, 2, replicas, TIMEOUT_MS)
        try:
            keys = keys_for(settings(pair[0], replicas))
            queue = keys.shard(0)
            started = time.monotonic()
            reply = await scripts.run(job_calls.push(queue, "main", b"job", 0, 0))
            return reply, time.monotonic() - started
        finally:
            await scripts.close()
            await engine_client.aclose()

    with caplog.at_level(logging.WARNING, logger="app.lua.pipe"):
        reply, _ = asyncio.run(call_with(1))
    # no warning proves the replica confirmed in time; the wall clock would also count
    # the first connection and script load, which a loaded machine stretches past 200 ms
    assert (reply, caplog.text) == (1, "")
    with caplog.at_level(logging.WARNING, logger="app.lua.pipe"):
        reply, took = asyncio.run(call_with(2))
    assert reply == 0  # answered (the job existed), after the wait
    assert took >= TIMEOUT_MS / 1000
    assert "not confirmed by 2 replica(s)" in caplog.text
    index = keys_for(settings(pair[0], 1)).shard(0).jobs_index("main")
    with redis.Redis(port=pair[1].port) as replica:
        wait_until(lambda: replica.exists(index), 5, "the replica's copy")
