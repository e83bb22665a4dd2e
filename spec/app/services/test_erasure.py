"""An erasure by ordering key where keys live apart (app/services/erasure.py), on the
real server: a subscriber of concurrency 2 whose failing key stepped aside (the aside
partition counts it in its `keys` hash, which holds the key itself) and whose batch of
that key is in flight. The erasure waits for the flight, then leaves no trace of the key:
not in a batch, not in the aside partition's count; its partition mate is untouched and
still delivered in order."""

from __future__ import annotations

import json
from dataclasses import replace

from app.models import partitions
from app.models.attempt_result import answered
from app.models.erasure_calls import Match
from app.models.erasures import create
from app.services.erasure import Eraser
from spec.app.lua.test_aside import N, mates, number, publish
from spec.app.lua.test_places import WORKERS, Line, key_of


def everything(client) -> bytes:
    return b"".join(
        repr(client.dump(k)).encode() + k for k in client.keys(b"*")
    )  # fmt: skip


def test_an_erasure_by_key_waits_for_its_flight_and_clears_the_aside_count(
    redis_client, keys, scripts, settings
):
    line = Line(redis_client, keys, scripts, replace(settings, retry_lone_ms=1_000))
    poison, mate = mates(2)
    for i in range(3):
        publish(line, poison, i)
        publish(line, mate, i)
        line.now += 1
    first = line.take(WORKERS[0])
    assert first is not None and key_of(first) == poison
    line.delivery.finish(first, answered(500))
    line.now += 1_600
    (again,) = line.begin_all(WORKERS[0])
    line.delivery.finish(again, answered(500))  # twice in a row: the key steps aside
    aside = partitions.pid("sub", N, N)
    assert redis_client.hget(keys.aside_keys(aside), poison) == b"3"
    line.now += 3_200
    flights = {key_of(f): f for f in line.begin_all(WORKERS[1])}
    assert set(flights) == {poison, mate}  # the key aside and its mate, both in flight

    match = Match("key", poison, (), line.now + 10)
    scripts.run(create(keys, "er_0000000000000001", match, "root", "", line.now))
    eraser = Eraser(redis_client, keys, scripts)
    assert eraser.run("er_0000000000000001", 10, line.now) == "waiting"  # not under its feet
    assert redis_client.hget(keys.aside_keys(aside), poison) == b"1"  # the flying one's
    line.delivery.finish(flights[poison], answered(500))
    line.ack(flights[mate])
    progress = eraser.run("er_0000000000000001", 10, line.now)
    assert progress == "done"
    assert not redis_client.exists(keys.aside_keys(aside))
    assert poison.encode() not in everything(redis_client)
    receipt = {k.decode(): v for k, v in redis_client.hgetall(
        keys.home("sub").erasure("er_0000000000000001")).items()}  # fmt: skip
    assert int(receipt["queued.events"]) == 3
    record = redis_client.hget(keys.catalog.erasure("er_0000000000000001"), "match")
    assert poison not in json.loads(record).values()
    delivered = []
    while flights := line.begin_all(WORKERS[2]):
        for flight in flights:
            assert key_of(flight) == mate
            delivered.append(number(flight))
            line.ack(flight)
    assert delivered == sorted(delivered) and len(delivered) >= 2
