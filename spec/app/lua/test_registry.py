"""The Lua registry: every script documents its KEYS/ARGV and loads on a real server."""

from __future__ import annotations

from importlib import resources

import redis

from app.lua import Scripts


def test_every_script_has_a_keys_and_argv_header():
    for entry in resources.files("app.lua").iterdir():
        if entry.name.endswith(".lua"):
            head = entry.read_text().splitlines()[:12]
            assert any(line.startswith("-- KEYS[") for line in head), entry.name
            assert any(line.startswith("-- ARGV[") for line in head), entry.name


def test_scripts_register_and_survive_a_script_flush(redis_client: redis.Redis, scripts: Scripts):
    assert "token_delete" in scripts.names()
    redis_client.hset("t", "a", "x")
    assert scripts.token_delete(keys=["t", "s", "h"], args=["a"]) == 1
    redis_client.script_flush()  # as after a Redis restart: EVALSHA must reload
    assert scripts.token_delete(keys=["t", "s", "h"], args=["a"]) == 0
