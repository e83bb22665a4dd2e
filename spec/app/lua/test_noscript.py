"""EVALSHA after a restart (app/lua/noscript.py) on a real server: a script missing from
its cache is loaded and called once more; any other error is the caller's, unloaded."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
import redis
import redis.asyncio

from app.lua.noscript import loaded, loaded_async

TEXT = "redis.call('INCR', KEYS[1]); return redis.call('GET', KEYS[1])"
SHA = hashlib.sha1(TEXT.encode()).hexdigest()


def test_a_missing_script_is_loaded_and_runs_once(redis_client: redis.Redis):
    redis_client.script_flush()
    loads: list[str] = []

    def load() -> object:
        loads.append(SHA)
        return redis_client.script_load(TEXT)

    def call() -> object:
        return redis_client.evalsha(SHA, 1, "noscript:n")

    assert loaded(call, load) == b"1"  # NOSCRIPT first: it never ran, so 1, not 2
    assert loaded(call, load) == b"2" and loads == [SHA]  # cached now: no second load


def test_another_error_is_not_a_reason_to_load(redis_client: redis.Redis):
    redis_client.set("noscript:text", "x")
    redis_client.script_load(TEXT)
    loads: list[int] = []
    with pytest.raises(redis.ResponseError, match="not an integer"):
        loaded(lambda: redis_client.evalsha(SHA, 1, "noscript:text"), lambda: loads.append(1))
    assert loads == []


def test_the_asyncio_form_does_the_same(redis_url: str, redis_client: redis.Redis):
    redis_client.script_flush()

    async def scenario() -> list[object]:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            call = lambda: client.evalsha(SHA, 1, "noscript:a")  # noqa: E731
            load = lambda: client.script_load(TEXT)  # noqa: E731
            return [await loaded_async(call, load), await loaded_async(call, load)]
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) == [b"1", b"2"]
