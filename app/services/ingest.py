"""Publishing: validated events go to every subscriber of the topic in one Lua call.

The whole request is one EVALSHA, whatever the number of events or subscribers, so a
bulk publish is one round trip and either lands whole or not at all.
"""

from __future__ import annotations

import time

import redis

from app.errors import Forbidden, Unauthorized
from app.lua import Scripts
from app.models.event import Event
from app.models.keys import Keys
from config.settings import Settings

MAIN = "main"


def now_ms() -> int:
    return int(time.time() * 1000)


class Ingest:
    def __init__(
        self, client: redis.Redis, keys: Keys, scripts: Scripts, settings: Settings
    ) -> None:
        self._keys = keys
        self._scripts = scripts
        self._default_ttl_ms = settings.default_ttl * 1000

    def publish(
        self, topic: str, publisher: str, events: list[Event], now: int | None = None
    ) -> int:
        """Queue events for every subscriber; returns how many (event, subscriber) pairs.

        The script also checks that the publisher's token exists, so the hot path needs
        no separate lookup and a token deleted mid-request cannot publish."""
        if not events:
            return 0
        k = self._keys
        args: list[object] = [k.prefix, topic, publisher, now or now_ms(), self._default_ttl_ms]
        for event in events:
            args += [event.type, event.url, event.pack(topic)]
        status, queued = self._scripts.publish(
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
            args=args,
        )
        if status == -2:
            raise Unauthorized("unknown API token")
        if status == -1:
            raise Forbidden(f"topic {topic} belongs to another publisher")
        return int(queued)
