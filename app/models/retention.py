"""Payload retention: how long a delivered or dead-lettered event's payload is kept.

Each topic may have its own (`retention_s` in its hash, set by its publisher or root:
PUT /topics/<name>/retention), else the bus's BUSBAR_PAYLOAD_RETENTION_S; 0 keeps
forever. What it bounds, and how, is app/services/retention.py's (docs/erasure.md,
Retention): queued events are not payloads kept but events on their way, bounded by
their route's ttl instead.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, NamedTuple

import redis

from app.errors import Forbidden, InvalidInput, NotFound
from app.lua import Scripts
from app.lua.call import Call
from app.models.fields import Integer, Rules, Shape
from app.models.keys import Keys
from app.redis_client import text

MOST_S = 100 * 365 * 86_400
REQUEST = Shape(
    {
        "retention_s": Integer(
            0, MOST_S, nullable=True,
            description="seconds this topic's delivered and dead-lettered payloads are kept "
            "(0: kept); null: the bus's default (BUSBAR_PAYLOAD_RETENTION_S)",
        )
    },
    required=("retention_s",),
)  # fmt: skip


class Put(enum.IntEnum):
    """topic_retention.lua's reply."""

    SET = 1
    NO_TOPIC = -1
    NOT_PUBLISHER = -2  # the caller is not the topic's publisher (nor root)


def put(keys: Keys, topic: str, caller: str | None, seconds: int | None) -> Call[Put]:
    return Call(
        "topic_retention",
        [keys.topics, keys.topic(topic)],
        [topic, caller or "", "" if seconds is None else seconds],
        lambda reply: Put(int(reply)),
    )


DEAD_BUDGET = 500  # dead letters a retention step reads


class Retired(NamedTuple):
    removed: int
    next: int | None  # the list index to go on at; None when done


def _retired(reply: Any) -> Retired:
    removed, at = (int(v) for v in reply)
    return Retired(removed, None if at < 0 else at)


def retire_deadletters(
    keys: Keys, token: str, now: int, default_ms: int, by_topic: dict[str, int], at: int
) -> Call[Retired]:
    """One step over a subscriber's dead letters from list index `at`: those whose
    topic's retention (`by_topic`, ms, else `default_ms`) ran out since they failed go."""
    return Call(
        "deadletters_retire",
        [keys.deadletters(token), keys.subscriber(token), keys.home(token).counters],
        [now, default_ms, json.dumps(by_topic), at, DEAD_BUDGET],
        _retired,
    )


@dataclass(frozen=True)
class Retention:
    client: redis.Redis
    keys: Keys
    scripts: Scripts
    default_s: int  # BUSBAR_PAYLOAD_RETENTION_S

    def set(self, topic: str, caller: str | None, body: Any) -> dict[str, Any]:
        """PUT /topics/<name>/retention: `caller` the client's key, None for root."""
        if not isinstance(body, dict):
            raise InvalidInput("the body must be a JSON object")
        REQUEST.known(body, "a retention")
        if "retention_s" not in body:
            raise InvalidInput("retention_s is required (null: the bus's default)")
        value = body["retention_s"]
        seconds = None if value is None else REQUEST.fields["retention_s"].check(
            value, "retention_s", Rules())  # fmt: skip
        done = self.scripts.run(put(self.keys, topic, caller, seconds))
        if done is Put.NO_TOPIC:
            raise NotFound(f"no topic {topic}")
        if done is Put.NOT_PUBLISHER:
            raise Forbidden(f"only {topic}'s publisher (or root) sets its retention")
        return self.get(topic)

    def get(self, topic: str) -> dict[str, Any]:
        own = self.client.hget(self.keys.topic(topic), "retention_s")
        if own is None and not self.client.sismember(self.keys.topics, topic):
            raise NotFound(f"no topic {topic}")
        seconds = int(own) if own is not None else None
        return {"topic": topic, "retention_s": seconds,
                "effective_s": seconds if seconds is not None else self.default_s}  # fmt: skip

    def by_topic(self) -> dict[str, int]:
        """Every topic's own retention (s), for those that have one."""
        names = sorted(text(t) for t in self.client.smembers(self.keys.topics))
        with self.client.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hget(self.keys.topic(name), "retention_s")
            values = pipe.execute()
        return {n: int(v) for n, v in zip(names, values, strict=True) if v is not None}

    def horizon_s(self, own: dict[str, int]) -> int:
        """The shortest retention in force (s; 0: none): the streams, which mix every
        topic's events, keep nothing older."""
        kept = [s for s in (self.default_s, *own.values()) if s > 0]
        return min(kept) if kept else 0
