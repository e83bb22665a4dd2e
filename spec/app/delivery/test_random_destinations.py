"""A random valid subscription with a NATS JetStream destination, on the engine the
workers run (spec/app/delivery/test_random_subscriptions.py's rig and model). Each
example draws a subscription as that test does (any routes with priorities, ttl,
types, coalescing, filters and transforms over one or two topics; max, timeout,
concurrency 1-8, max_attempts, event_ids), sends it to a stream of its own in place of
a callback (the HTTP-only fields, which a destination refuses, left out), publishes
drawn events and lets the real engine publish them into a real nats-server. Then the
stream holds every event that must arrive once, with the data its route's transform
makes, and none that must not; each key's events (each lane's at `concurrency` 1) in
publish order, an event coalesced in place holding the place of the one it replaced;
each message's Nats-Msg-Id its event's id; the test call finds the stream. The failures
a receiver can draw are HTTP's; a broker's (no stream, an outage) are the destination
matrix's (spec/integration/destination_matrix.py)."""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import nats
import pytest
from hypothesis import HealthCheck, given, note, settings

from app.clock import now_ms
from spec.app.delivery.subscriptions_strategy import (
    Case,
    Published,
    ReceiverDraw,
    cases,
    places,
    verdicts,
)
from spec.app.delivery.test_random_subscriptions import (
    RANDOM,
    ROOT,
    Names,
    Rig,
    basic,
    body_of,
    publish,
)
from spec.budget import examples
from spec.nats_server import NatsServer, nats_server

EXAMPLES = int(os.environ.get("BUSBAR_PROPERTY_EXAMPLES", "0")) or examples(16)
HTTP_ONLY = ("callback", "headers", "auth", "client_cert", "uuid")
ALWAYS_OK = ReceiverDraw(0, 500, 200, 0)  # no receiver: nothing fails on purpose


def stream_of(server: NatsServer, name: str) -> list[dict[str, Any]]:
    async def read() -> list[dict[str, Any]]:
        client = await nats.connect(server.url)
        try:
            js = client.jetstream()
            info = await js.stream_info(name)
            found = []
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                if info.state.messages:
                    raw = await js.get_msg(name, seq)
                    found.append({**json.loads(raw.data or b"{}"),
                                  "msg_id": (raw.headers or {}).get("Nats-Msg-Id")})  # fmt: skip
            return found
        finally:
            await client.close()

    return asyncio.run(read())


def add_stream(server: NatsServer, name: str, subjects: str) -> None:
    async def add() -> None:
        client = await nats.connect(server.url)
        await client.jetstream().add_stream(name=name, subjects=[subjects])
        await client.close()

    asyncio.run(add())


def ran(r: Rig, server: NatsServer, case: Case) -> tuple[list[Published], int, list, dict]:
    n = next(r.count)
    sub = case.subscription
    letters = "".join("abcdefghij"[int(c)] for c in str(n))
    names = Names(f"tok-dest-{n}", f"dest{n}",
                  [f"d_{letters}_{'abc'[j]}" for j in range(len(sub.topics) + 1)],
                  "", "", "")  # fmt: skip
    stream = f"D{n}"
    add_stream(server, stream, f"dest.{n}.>")
    r.call("POST", "/api_tokens", ROOT, {"name": names.name, "token": names.token})
    own = basic(names.token)
    body = {k: v for k, v in body_of(r, sub, names).items() if k not in HTTP_ONLY}
    body["destination"] = {"type": "nats", "url": server.url, "stream": stream,
                           "subject": f"dest.{n}.{{type}}.{{key}}"}  # fmt: skip
    r.call("POST", "/subscription", own, body)
    try:
        published = publish(r, case, names)
        settled(r, names.token)
        drained_at = now_ms()
        trial = r.call("POST", "/subscription/test", own)
        dead = r.call("GET", "/subscriber/deadletters", own)
    finally:
        r.web.delete("/subscriber", headers=own)
    assert trial["status"] == 200, trial
    assert dead == [], dead  # nothing fails here
    return published, drained_at, stream_of(server, stream), trial


def settled(r: Rig, token: str) -> None:
    """Until nothing is queued (the gauge counts a batch in flight until its ack)."""
    deadline = now_ms() + 20_000
    while r.queued(token):
        assert now_ms() < deadline, f"{r.queued(token)} event(s) still queued after 20 s"
        asyncio.run(asyncio.sleep(0.005))


def check(case: Case, published: list[Published], drained_at: int, held: list[dict]) -> None:
    got = Counter(m["data"]["i"] for m in held)
    by_i = {e.i: e for e in published}
    for e, verdict in zip(published, verdicts(case, published, drained_at), strict=True):
        if verdict.never:
            assert not got[e.i], f"event {e.i} in the stream {got[e.i]}x, never due: {e}"
        else:
            assert got[e.i] <= 1, f"event {e.i} in the stream {got[e.i]} times"
            assert got[e.i] == 1 or not verdict.must, f"event {e.i} never in the stream: {e}"
    concurrency = case.subscription.concurrency or 1
    last: dict[tuple[int, str], int] = {}
    for m in held:
        e = by_i[m["data"]["i"]]
        assert e.route is not None, e
        assert m["data"] == e.route.shaped(e.view()["data"]), m
        assert m["msg_id"] == m["id"], m
        group = (e.route.lane, e.key if concurrency > 1 else "")
        after = last.get(group, -1)
        ranks = sorted(x for x in places(case, published, e) if x > after)
        assert ranks, f"event {e.i} came after place {after} of {group}: out of order"
        last[group] = ranks[0]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with nats_server(Path(tmp_path_factory.mktemp("nats"))) as server:
        yield server


@pytest.mark.timeout(900)  # shrinking a failure runs many examples
def test_a_random_subscription_to_a_stream_gets_what_it_was_promised(bus: Rig, broker: NatsServer):
    @settings(
        max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )  # fmt: skip
    @given(case=cases().map(lambda c: replace(c, receiver=ALWAYS_OK)))
    def promised(case: Case) -> None:
        note(repr(case))
        check(case, *ran(bus, broker, case)[:3])

    promised()
