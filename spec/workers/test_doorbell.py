"""The doorbell idle delivery threads wait on: a ring wakes one of them at once, and each
shard is watched by one thread at most."""

from __future__ import annotations

import threading
import time

from workers.doorbell import Doorbell


def test_a_ring_wakes_one_waiting_helper_at_once():
    bell = Doorbell(shards=4)
    woken: list[bool] = []
    waiters = [threading.Thread(target=lambda: woken.append(bell.wait(2))) for _ in range(3)]
    for t in waiters:
        t.start()
    time.sleep(0.1)
    started = time.monotonic()
    bell.ring()
    while not woken and time.monotonic() - started < 2:
        time.sleep(0.001)
    assert woken == [True] and time.monotonic() - started < 0.5
    for t in waiters:
        t.join(3)
    assert sorted(woken) == [False, False, True]  # the others waited out their timeout


def test_a_thread_that_was_not_rung_waits_out_its_timeout():
    started = time.monotonic()
    assert Doorbell(shards=1).wait(0.2) is False
    assert time.monotonic() - started >= 0.19


def test_each_ring_is_answered_once():
    bell = Doorbell(shards=2)
    for _ in range(3):
        bell.ring()
    assert [bell.wait(0) for _ in range(4)] == [True, True, True, False]


def test_a_shard_is_watched_by_one_thread_until_it_gives_the_watch_back():
    bell = Doorbell(shards=3, first=1)
    assert [bell.claim(), bell.claim(), bell.claim(), bell.claim()] == [1, 2, 0, None]
    bell.release(2)
    assert (bell.claim(), bell.claim()) == (2, None)
