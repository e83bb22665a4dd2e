"""`busbar_operations`: the bus's own topic, where it tells operators what happened to it.

A subscriber paused or resumed, its circuit opened or closed, events dead-lettered or
dropped (Autodrop's last resort, or a subscriber over its fair share), a worker found
dead. Each is appended to an operations stream (app/models/keys.py) in the very step that
makes it true: the shard's scripts for a subscriber (lib/operations.lua), the catalog
for a worker. The Operations job (`relay`) then publishes each stream, in order, to the
topic through the same ingest as any publish, so an operator client subscribes to it
like to any topic and gets its events signed, retried, ordered, with routes and ids.

No client may publish to the topic or own it (its publisher is SYSTEM_PUBLISHER, which
no token can be), and only clients root marked as operators may subscribe to it: the
events name every subscriber of the bus, by client name (never a token).

Exactly once per stream entry: a step first records the last entry it takes (`upto`),
publishes those entries under a publish id made of the step's bounds, then moves the
cursor. A step cut short is redone with the same entries and the same id, which the
publish's dedupe drops while BUSBAR_PUBLISH_DEDUPE_S lasts; after that, each event's id
(derived from its stream entry) still lets a receiver drop a copy.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote

import redis

from app.errors import Forbidden
from app.models import event_ids
from app.models.event import Event
from app.models.keys import OPERATIONS_KEPT, SYSTEM_PUBLISHER, Keys, Place
from app.redis_client import text
from app.services.ingest import Ingest

log = logging.getLogger("busbar.operations")
TOPIC = "busbar_operations"
STEP = 500  # stream entries published per step: one publish
STEPS = 20  # steps per stream per run at most: the job stays short, the next run goes on
# an event's type (Routemaster's vocabulary) by what it tells; `update` otherwise
TYPES = {"worker.dead": "delete"}


def refuse_publish(topic: str) -> None:
    """The web's check before any client's publish to the bus's own topic."""
    if topic == TOPIC:
        raise Forbidden(f"{TOPIC} is the bus's own topic: only busbar publishes to it")


def event_of(place: Place, entry_id: str, fields: dict[str, str], public_url: str) -> Event:
    """A stream entry as the event published: data `{"kind": ..., ...}`, the url of what
    it is about (under BUSBAR_PUBLIC_URL), the time it happened, an id of its own."""
    kind = fields.get("kind", "unknown")
    try:
        detail = json.loads(fields.get("data", "{}"))
    except ValueError:
        detail = {}
    data: dict[str, Any] = {"kind": kind, **(detail if isinstance(detail, dict) else {})}
    if "subscriber" in data:
        url = f"{public_url}/subscribers/{quote(str(data['subscriber']), safe='')}"
    else:
        url = f"{public_url}/workers/{quote(str(data.get('worker', '')), safe='')}"
    return Event(
        type=TYPES.get(kind, "update"),
        url=url,
        t=int(entry_id.split("-", 1)[0]),
        data=data,
        event_id=event_ids.for_publish(TOPIC, f"{place.base}{entry_id}", 0),
    )


def note_worker_dead(client: redis.Redis, keys: Keys, process: str, jobs: int) -> None:
    """A worker process found dead with jobs in hand (given back to the queues)."""
    client.xadd(
        keys.catalog.operations,
        {"kind": "worker.dead", "data": json.dumps({"worker": process, "jobs": jobs})},
        maxlen=OPERATIONS_KEPT,
        approximate=True,
    )


class Operations:
    """The Operations job's work: every operations stream published to TOPIC."""

    def __init__(self, client: redis.Redis, keys: Keys, ingest: Ingest, public_url: str) -> None:
        self._redis = client
        self._keys = keys
        self._ingest = ingest
        self._public_url = public_url

    def relay(self) -> int:
        """Publish what every stream holds beyond its cursor; returns how many events.
        One pipelined round trip finds the streams with something to publish (most runs:
        none), so an idle bus costs one trip a run, not two per shard."""
        total = 0
        for place in self._pending():
            for _ in range(STEPS):
                sent = self._step(place)
                total += sent
                if not sent:
                    break
        return total

    def _pending(self) -> list[Place]:
        """The streams whose newest entry is beyond their cursor, or with a step under way."""
        places = [self._keys.catalog, *self._keys.all_shards()]
        pipe = self._redis.pipeline(transaction=False)
        for place in places:
            pipe.hmget(place.operations_relay, "cursor", "upto")
            pipe.xrevrange(place.operations, count=1)
        replies = pipe.execute()
        pending = []
        for i, place in enumerate(places):
            (cursor, upto), newest = replies[2 * i], replies[2 * i + 1]
            if upto is not None or (newest and newest[0][0] != cursor):
                pending.append(place)
        return pending

    def _entries(
        self, place: Place, start: str, end: str, count: int | None
    ) -> list[tuple[bytes, dict[bytes, bytes]]]:
        found: Any = self._redis.xrange(place.operations, start, end, count=count)
        return list(found or [])

    def _step(self, place: Place) -> int:
        cursor, upto = (
            text(v) if v is not None else None
            for v in self._redis.hmget(place.operations_relay, "cursor", "upto")
        )
        start = f"({cursor}" if cursor else "-"
        if upto is None:  # a new step: fix its entries before publishing any
            entries = self._entries(place, start, "+", STEP)
            if not entries:
                return 0
            upto = text(entries[-1][0])
            self._redis.hset(place.operations_relay, "upto", upto)
        else:  # a step cut short: the same entries again, under the same publish id
            entries = self._entries(place, start, upto, None)
        events = [
            event_of(place, text(entry_id), {text(k): text(v) for k, v in fields.items()},
                     self._public_url)
            for entry_id, fields in entries
        ]  # fmt: skip
        if events:
            step_id = f"operations:{place.base}:{cursor or '-'}:{upto}"
            self._ingest.publish(
                TOPIC, SYSTEM_PUBLISHER, events, publish_id=step_id, fingerprint=upto
            )
        done = self._redis.pipeline(transaction=True)  # one key: one slot on a cluster
        done.hset(place.operations_relay, "cursor", upto)
        done.hdel(place.operations_relay, "upto")
        done.execute()
        return len(events)
