"""The topic step on a kept connection (app/lua/held.py), on a real server: what a Redis
restart does to it (connections closed, script cache emptied), and threads that end."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
from pathlib import Path

import redis

from app.lua import Scripts
from app.models.event import Event
from app.models.keys import Keys
from app.models.tokens import TokenStore
from app.redis_client import connect
from app.services.ingest import Ingest
from config.settings import Settings

EVENT = [Event("create", "https://o.test/1", 1, None)]


def ingest_on(redis_url: str, keys: Keys) -> tuple[Ingest, redis.Redis]:
    client = connect(Settings(redis_url=redis_url))
    TokenStore(client, keys).create("pub", "pub")
    return Ingest(client, keys, Scripts(client), Settings()), client


def published(redis_client: redis.Redis, keys: Keys) -> int:
    return int(redis_client.hget(keys.topic("orders"), "counter") or 0)


def test_a_connection_redis_closed_is_replaced_before_the_publish(
    redis_url: str, redis_client: redis.Redis, keys: Keys
):
    ingest, client = ingest_on(redis_url, keys)
    ingest.publish("orders", "pub", EVENT)  # this thread now keeps a connection
    assert redis_client.client_kill_filter(_type="normal", skipme=True) >= 1
    ingest.publish("orders", "pub", EVENT)  # no error: reconnected first
    assert published(redis_client, keys) == 2
    client.close()


def test_an_emptied_script_cache_loads_the_script_and_runs_it_once(
    redis_url: str, redis_client: redis.Redis, keys: Keys
):
    ingest, client = ingest_on(redis_url, keys)
    ingest.publish("orders", "pub", EVENT)
    redis_client.script_flush()  # as after a restart without persistence of scripts
    ingest.publish("orders", "pub", EVENT)
    assert published(redis_client, keys) == 2
    client.close()


def test_threads_that_end_give_their_connection_back(
    redis_url: str, redis_client: redis.Redis, keys: Keys
):
    """Twenty threads one after another: each takes the connection the one before gave
    back, so Redis sees no more connections than with one thread."""
    ingest, client = ingest_on(redis_url, keys)
    ingest.publish("orders", "pub", EVENT)
    before = len(redis_client.client_list())
    for _ in range(20):
        thread = threading.Thread(target=ingest.publish, args=("orders", "pub", EVENT))
        thread.start()
        thread.join()
        gc.collect()
    assert len(redis_client.client_list()) <= before + 1
    assert published(redis_client, keys) == 21
    client.close()


SEND_UNDER_GEVENT = """
import socket, sys, time
from gevent import monkey; monkey.patch_all()
import hiredis, redis
from app.lua.held import send
client = redis.Redis.from_url(sys.argv[1], health_check_interval=1)
connection = client.connection_pool.get_connection()
connection._sock._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
send(connection, hiredis.pack_command(("PING",)))
connection.read_response()
time.sleep(1.2)  # its health check is due: never in the middle of a command
send(connection, hiredis.pack_command(("SET", "held-big", b"x" * 4_000_000)))
print(connection.read_response())
"""


def test_a_topic_step_larger_than_one_send_arrives_whole_under_gevent(
    redis_url: str, redis_client: redis.Redis
):
    """As `busbar web` sends (gevent, a non-blocking socket): the first send on the OS
    socket takes what its 4 KiB buffer holds, gevent's sendall the rest, with no health
    check (a PING) between the two though one is due."""
    result = subprocess.run(
        [sys.executable, "-c", SEND_UNDER_GEVENT, redis_url],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[3],
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "b'OK'"
    assert redis_client.get("held-big") == b"x" * 4_000_000
