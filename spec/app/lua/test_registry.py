"""The Lua registry: every script documents its KEYS/ARGV and loads on a real server."""

from __future__ import annotations

from importlib import resources

import redis

from app.lua import Scripts, header
from app.models.keys import Keys
from app.models.subscriber_calls import unsubscribe_topic


def test_every_script_has_a_keys_and_argv_header():
    for entry in resources.files("app.lua").iterdir():
        if entry.name.endswith(".lua"):
            head = header(entry.read_text())
            assert any(line.startswith("-- KEYS[") for line in head), entry.name
            assert any(line.startswith("-- ARGV[") for line in head), entry.name


def test_scripts_register_and_survive_a_script_flush(redis_client: redis.Redis, scripts: Scripts):
    assert {"publish", "subscribe", "subscriber_delete"} <= set(scripts.names())
    keys = Keys("registry-test:", 1)
    redis_client.hset(keys.subscribers, "tok", '["orders"]')
    redis_client.hset(keys.topic_subscribers("orders"), "tok", "route")
    assert scripts.run(unsubscribe_topic(keys, "tok", "orders")) is True
    redis_client.script_flush()  # as after a Redis restart: EVALSHA must reload
    assert scripts.run(unsubscribe_topic(keys, "tok", "orders")) is False
