"""The Redis side of a lake replay (spark/replay.py reads the lake and drives it): the
target and its routes, the replay's record, and the steps that queue events.

Exactly once into the queue: the record holds the position (events of the selection
consumed so far), and each step names the position it read and moves it in the script
that queues (replay_queue.lua). A driver killed anywhere restarts from the record's
position; a step that ran but whose answer was lost is not run again (its position no
longer matches). Events keep their original id, go in batches of their own, and their
TTL counts from the replay.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import redis

from app import codec
from app.codec import RouteEntry
from app.errors import BusbarError, InvalidInput, NotFound
from app.lua import Scripts
from app.models.filters import Filter, view_of
from app.models.keys import Keys
from app.models.publish_calls import Replayed, ReplayRows, replay_queue
from app.models.subscribers import SubscriberStore
from app.models.tokens import TokenStore
from app.models.validate import digits
from app.redis_client import raw, text
from app.services.topic_rules import parse_stored

LISTED = 100  # replays GET /replays shows, newest first
HIDDEN = ("token",)  # record fields never listed


def replay_id(selection: dict[str, Any], target: str) -> str:
    """The id a replay gets from what it selects and where it goes: the same replay
    asked again is the same replay (and resumes)."""
    given = json.dumps({"selection": selection, "target": target}, sort_keys=True)
    return "rpl_" + hashlib.sha256(given.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Target:
    name: str
    token: str
    routes: dict[str, dict[str, RouteEntry]]  # topic -> type -> its route (app/codec.py)
    filters: dict[str, tuple[Filter, ...]] = field(default_factory=dict)  # topic -> by number

    def lane_of(
        self, topic: str, type_: str, lane: int | None, default_ttl_s: int, event: bytes = b""
    ) -> tuple[int, int] | None:
        """(lane, ttl ms) an event (`event`: packed, as the lake row gives it) takes:
        --lane's with the default TTL, else its route's as a publish would give it, its
        content filters included; None when the target's routes do not take it."""
        if lane is not None:
            return lane, default_ttl_s * 1000
        entry = self.routes.get(topic, {}).get(type_)
        taken = self._first_matching(topic, entry, event) if isinstance(entry, list) else entry
        if taken is None:
            return None
        lane_taken, ttl_s = int(taken[0]), int(taken[1]) or default_ttl_s
        return lane_taken, ttl_s * 1000

    def _first_matching(
        self, topic: str, candidates: list[tuple[int, int, bool, int]], event: bytes
    ) -> tuple[int, int, bool, int] | None:
        queued = codec.unpack_entry(b"0|" + event)
        view = view_of({"type": queued.type, "url": queued.url, "key": queued.key,
                        "data": queued.data})  # fmt: skip
        filters = self.filters.get(topic, ())
        for c in candidates:
            if c[3] == 0 or (c[3] <= len(filters) and filters[c[3] - 1].matches(view)):
                return c
        return None


class Replays:
    def __init__(self, client: redis.Redis, keys: Keys, scripts: Scripts) -> None:
        self._redis = client
        self._keys = keys
        self._scripts = scripts

    def target(self, name: str) -> Target:
        """The subscriber named `name`, with its route tables; NotFound when no client of
        that name has a subscription, InvalidInput when several have."""
        store = SubscriberStore(self._redis, self._keys, self._scripts)
        tokens = [t for t in TokenStore(self._redis, self._keys).tokens_named(name)
                  if store.is_subscriber(t)]  # fmt: skip
        if not tokens:
            raise NotFound(f"no subscriber named {name!r}")
        if len(tokens) > 1:
            raise InvalidInput(f"{len(tokens)} subscribers are named {name!r}: rename all but one")
        token = tokens[0]
        topics = json.loads(text(self._redis.hget(self._keys.subscribers, token) or b"[]"))
        routes: dict[str, dict[str, RouteEntry]] = {}
        filters: dict[str, tuple[Filter, ...]] = {}
        for topic in topics:
            value = self._redis.hget(self._keys.topic_subscribers(topic), token)
            if value is not None:
                routes[topic] = codec.unpack_route(raw(value))
            listed = self._redis.hget(self._keys.topic_filters(topic), token)
            if listed is not None:
                filters[topic] = parse_stored(0, {token: raw(listed)}).by_subscriber[token]
        return Target(name, token, routes, filters)

    def record_key(self, token: str, replay: str) -> str:
        return self._keys.home(token).replay(replay)

    def saved(self, target: Target, replay: str) -> dict[str, str]:
        """The replay's record as stored ({} when there is none)."""
        stored = self._redis.hgetall(self.record_key(target.token, replay))
        return {text(k): text(v) for k, v in stored.items()}

    def start(
        self, replay: str, target: Target, fields: dict[str, Any], now: int, restart: bool
    ) -> tuple[str, int]:
        """Begin the replay, or find it begun: ('started' | 'resumed' | 'restarted',
        position). A restart forgets the position (events queued before are queued again)."""
        key = self.record_key(target.token, replay)
        found = self._redis.hget(key, "position")
        if found is not None and not restart:
            self._redis.hset(key, mapping={"state": "running", "updated_at": now, "note": ""})
            return "resumed", int(found)
        record = {
            "id": replay, "target": target.name, "token": target.token, "state": "running",
            "position": 0, "started_at": now, "updated_at": now, "note": "", **fields,
        }  # fmt: skip
        self._redis.hset(key, mapping=record)  # type: ignore[arg-type]  # redis-py: values of any scalar type
        member = f"{self._keys.home(target.token).base}|{replay}"
        self._redis.zadd(self._keys.catalog.replays, {member: now})
        return ("restarted" if found is not None else "started"), 0

    def step(
        self,
        replay: str,
        target: Target,
        position: int,
        consumed: int,
        lane: int,
        ttl_ms: int,
        events: list[bytes],
        now: int,
    ) -> int:
        """Queue `events` (packed, ids given) as the `consumed` selection rows after
        `position` (rows the target does not take are consumed, not queued); the new
        position. The position moved on elsewhere (a second driver) or the target gone:
        BusbarError, nothing queued."""
        rows = ReplayRows(replay, position, consumed, lane, ttl_ms, events)
        step = self._scripts.run(replay_queue(self._keys, target.token, now, rows))
        if step.status is Replayed.GONE:
            raise NotFound(f"subscriber {target.name!r} was deleted during the replay")
        if step.status is Replayed.MOVED_ON or step.position != position + consumed:
            raise BusbarError(
                f"replay {replay} moved on elsewhere (at {step.position}, not {position}): "
                "is another driver running it?"
            )
        return step.position

    def queued_for(self, target: Target) -> int:
        """Events queued for the target now, in every lane."""
        return int(self._redis.hget(self._keys.home(target.token).event_gauge, target.token) or 0)

    def finish(self, replay: str, target: Target, state: str, now: int, note: str = "") -> None:
        self._redis.hset(
            self.record_key(target.token, replay),
            mapping={"state": state, "updated_at": now, "note": note},
        )

    def listing(self) -> list[dict[str, Any]]:
        """The newest LISTED replays' records, tokens left out (for GET /replays)."""
        members: list[bytes] = self._redis.zrevrange(self._keys.catalog.replays, 0, LISTED - 1)  # type: ignore[assignment]  # redis-py: a list on the sync client
        found = []
        for member in members:
            base, _, replay = text(member).rpartition("|")
            stored = self._redis.hgetall(f"{base}replay:{replay}")
            record: dict[str, Any] = {text(k): text(v) for k, v in stored.items()}
            if not record:
                continue
            for name in ("position", "selected", "started_at", "updated_at", "lane", "as_of"):
                if digits(str(record.get(name, "")).lstrip("-")):
                    record[name] = int(record[name])
            if "selection" in record:
                record["selection"] = json.loads(record["selection"])
            found.append({k: v for k, v in record.items() if k not in HIDDEN})
        return found
