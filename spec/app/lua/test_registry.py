"""The Lua registry: every script documents its KEYS/ARGV and loads on a real server."""

from __future__ import annotations

from importlib import resources

import pytest
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


def test_run_many_answers_each_call_in_order_across_a_script_flush(
    redis_client: redis.Redis, scripts: Scripts
):
    """Pipelined (Expire over every subscriber): each reply read by its own call, in the
    calls' order, past a pipeline's PIPELINED; a script the server lost is loaded and
    its call run, not skipped; an error in a call is raised, not returned."""
    keys = Keys("registry-many:", 1)
    for n in range(0, 1200, 2):  # every other one is subscribed: True, False, True...
        redis_client.hset(keys.subscribers, f"t{n}", '["orders"]')
        redis_client.hset(keys.topic_subscribers("orders"), f"t{n}", "route")
    calls = [unsubscribe_topic(keys, f"t{n}", "orders") for n in range(1200)]
    redis_client.script_flush()  # as after a Redis restart: every EVALSHA must reload
    assert scripts.run_many(calls) == [n % 2 == 0 for n in range(1200)]
    assert scripts.run_many(calls[:3]) == [False, False, False]  # done already
    redis_client.set(keys.subscribers, "not a hash")
    with pytest.raises(redis.ResponseError):
        scripts.run_many(calls[:2])
