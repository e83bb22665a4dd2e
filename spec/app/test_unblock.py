"""A stopping worker's blocked takes, ended at once (app/unblock.py), on a real Redis."""

from __future__ import annotations

import threading
import time

import redis

from app.unblock import blocking_name, unblock


def test_only_the_named_blocked_take_is_ended_and_it_moves_nothing(
    redis_url: str, redis_client: redis.Redis
) -> None:
    named = redis.Redis.from_url(redis_url, client_name=blocking_name("w.1.a"))
    other = redis.Redis.from_url(redis_url, client_name=blocking_name("w.2.b"))
    control = redis_client  # flushed
    answers: dict[str, object] = {}

    def take(client: redis.Redis, who: str) -> None:
        started = time.monotonic()
        answers[who] = client.blmove("from", "to", 30, "RIGHT", "LEFT")
        answers[f"{who} took"] = time.monotonic() - started

    threads = [
        threading.Thread(target=take, args=(named, "named"), daemon=True),
        threading.Thread(target=take, args=(other, "other"), daemon=True),
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and int(control.info("clients")["blocked_clients"]) < 2:
        time.sleep(0.01)
    assert unblock(control, blocking_name("w.1.a")) == 1
    threads[0].join(2)
    assert answers["named"] is None and answers["named took"] < 2  # not its 30 s
    assert threads[1].is_alive()  # another worker's take is its own
    control.lpush("from", b"job")  # the other take has it; the ended one moved nothing
    threads[1].join(2)
    assert answers["other"] == b"job" and control.llen("to") == 1
    assert unblock(control, blocking_name("w.1.a")) == 0  # nothing blocked now
    named.close(), other.close()
