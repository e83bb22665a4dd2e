"""Publishing: validated events go to every subscriber of the topic.

The first script checks the token, claims the topic, counts the events and queues them
for as many subscribers as its budget allows; a typical publish is that one round trip
and lands whole or not at all. A large fan-out (events x subscribers over the budget)
continues with publish_more for the subscribers left, a budget per call, so Redis never
runs one script long enough to stall every other client (measured by bench.scripts).
If the process dies between those steps, the publisher got no 204 and publishes again:
subscribers already served then get the events twice, which at-least-once allows.
"""

from __future__ import annotations

import time

import redis

from app.errors import Forbidden, Unauthorized
from app.lua import Scripts
from app.models.event import Event
from app.models.keys import Keys
from app.models.queue import MAIN
from config.settings import Settings

BUDGET = 3_000  # (event, subscriber) appends per script: about 12 ms on the CI machine


def now_ms() -> int:
    return int(time.time() * 1000)


class Ingest:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        scripts: Scripts,
        settings: Settings,
        budget: int = BUDGET,
    ) -> None:
        self._keys = keys
        self._scripts = scripts
        self._default_ttl_ms = settings.default_ttl * 1000
        self._budget = budget

    def publish(
        self, topic: str, publisher: str, events: list[Event], now: int | None = None
    ) -> int:
        """Queue events for every subscriber; returns how many (event, subscriber) pairs.

        The script also checks that the publisher's token exists, so the hot path needs
        no separate lookup and a token deleted mid-request cannot publish."""
        if not events:
            return 0
        k = self._keys
        now = now or now_ms()
        packed: list[object] = []
        for event in events:
            packed += [event.type, event.url, event.pack(topic)]
        status, queued, *rest = self._scripts.publish(
            keys=[
                k.topics,
                k.topic(topic),
                k.topic_subscribers(topic),
                k.counters,
                k.event_gauge,
                k.batch_gauge,
                *k.job_states(MAIN),
                k.tokens,
            ],
            args=[k.prefix, topic, publisher, now, self._default_ttl_ms, self._budget, *packed],
        )
        if status == -2:
            raise Unauthorized("unknown API token")
        if status == -1:
            raise Forbidden(f"topic {topic} belongs to another publisher")
        step = max(1, self._budget // len(events))
        for i in range(0, len(rest), step):
            chunk = rest[i : i + step]
            queued += self._scripts.publish_more(
                keys=[
                    k.topic_subscribers(topic),
                    k.counters,
                    k.event_gauge,
                    k.batch_gauge,
                    *k.job_states(MAIN),
                ],
                args=[k.prefix, now, self._default_ttl_ms, len(chunk), *chunk, *packed],
            )
        return int(queued)
