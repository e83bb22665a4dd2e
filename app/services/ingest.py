"""Publishing: validated events go to every subscriber of the topic.

A publish is the topic step (publish.lua, in the catalog: token check, claim, count)
then one step per shard that has subscribers (publish_queue.lua), in shard order, each
a budget of (event, subscriber) appends at most, so Redis never runs one script long
enough to stall every other client (measured by bench.scripts). On a single Redis the
topic step also queues, within its budget, so a typical publish is one round trip.

A publish id makes the steps safe to repeat: each remembers that it ran (the catalog
for the count, each shard step for what it queued) for a window, and a repeat of a step
that ran changes nothing. It is the client's `Idempotency-Key` when given (remembered
BUSBAR_PUBLISH_DEDUPE_S), and on a cluster one is made up per request (remembered a
minute), so busbar itself retries a step whose reply was lost or that met a failover,
for up to RETRY_S, before answering; the request answers 204 only when every step ran.
Without an id (single Redis, no header) nothing is retried: an error is a 503 and the
publisher's retry may queue twice on shards that already took the events.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
import uuid
from collections.abc import Callable
from itertools import groupby
from typing import NamedTuple, TypeVar

import redis
from redis.exceptions import ClusterDownError, TryAgainError

from app.clock import now_ms
from app.errors import Busy, Forbidden, InvalidInput, RateLimited, Unauthorized, Unprocessable
from app.lua import Scripts
from app.lua.call import Call
from app.lua.held import HeldScript
from app.models import publish_calls as calls
from app.models.event import Event
from app.models.keys import SCRIPT_BYTES, Keys, Place
from app.models.publish_calls import Publish, Published, TopicStep
from app.models.trace_context import TraceContext
from app.redis_client import is_cluster
from app.services.topic_rules import FilterCache, TopicFilters
from config.settings import Settings

log = logging.getLogger(__name__)
BUDGET = 3_000  # (event, subscriber) appends per script: about 12 ms on the CI machine
# ... and bytes appended per script: a fan-out of large events is bytes before it is
# appends (3 events of 256 KiB to 1,000 subscribers was one 2.3 s script)
BUDGET_BYTES = SCRIPT_BYTES
MADE_UP_ID_S = 60  # how long a made-up publish id is remembered: busbar's own retries
FILTER_TRIES = 3  # checks of one publish while its topic's filters or schemas change
RETRY_S = 5.0  # how long busbar retries a step of an identified publish
RETRIED = (redis.ConnectionError, redis.TimeoutError, ClusterDownError, TryAgainError)
T = TypeVar("T")


def retried(step: Callable[[], T], deadline: float) -> T:
    """Run a step that is safe to repeat until it gets an answer or the deadline passes."""
    pause = 0.05
    while True:
        try:
            return step()
        except RETRIED as exc:
            if time.monotonic() + pause > deadline:
                raise
            log.warning("publish step retried in %.2f s: %s", pause, exc)
            time.sleep(pause)
            pause = min(pause * 2, 1.0)


def matched(
    bodies: list[tuple[str, str, str, bytes]], events: list[Event], filters: TopicFilters
) -> list[object]:
    """publish.lua's five values an event: its four, and the filters it matched. A topic
    without content filters (most) builds no filter's view of any event."""
    if not filters.subscribers:
        return [value for body in bodies for value in (*body, "")]
    packed: list[object] = []
    for body, event in zip(bodies, events, strict=True):
        packed += [*body, filters.matched(event.view())]
    return packed


def scoped(publisher: str, topic: str, publish_id: str) -> str:
    """A client's publish id as the key names it: its own, for this topic (two
    publishers' `Idempotency-Key: order-123` never meet), and a digest, so that the token
    never appears in a key name."""
    return hashlib.sha256(f"{publisher}\n{topic}\n{publish_id}".encode()).hexdigest()[:32]


class Queued(NamedTuple):
    """What a publish queued, and where: the places it wrote to are the ones whose
    masters a BUSBAR_REDIS_MIN_REPLICAS barrier must cover (app/models/replicas.py), so
    a cluster's other masters need not be fenced for it."""

    pairs: int  # (event, subscriber) pairs queued
    places: tuple[Place, ...]  # the catalog, then every shard with a subscriber taking them


class Ingest:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        scripts: Scripts,
        settings: Settings,
        budget: int = BUDGET,
        budget_bytes: int = BUDGET_BYTES,
    ) -> None:
        self._keys = keys
        self._scripts = scripts
        # one Redis: the topic step on a connection each thread keeps (app/lua/held.py)
        self._topic: Callable[[Call[TopicStep]], TopicStep] = (
            scripts.run if is_cluster(client) else HeldScript(client, scripts, "publish").run
        )
        self._default_ttl_ms = settings.default_ttl * 1000
        self._budget, self._budget_bytes = budget, budget_bytes
        self._cluster = settings.redis_cluster
        self._window_s = settings.publish_dedupe_s
        self._filters = FilterCache(keys, scripts)
        self._rate, self._burst = settings.publish_rate, settings.publish_burst

    def _checked(
        self, topic: str, events: list[Event], rules: TopicFilters
    ) -> tuple[list[int | None], TopicFilters]:
        """Each event's schema version, by the rules this process holds; a refusal is
        made only by the rules Redis holds now (read again first: a schema removed or
        loosened through another process must not refuse what it now takes)."""
        try:
            return rules.checked(topic, events), rules
        except InvalidInput:
            fresh = self._filters.load(topic)
            return fresh.checked(topic, events), fresh

    def publish(
        self,
        topic: str,
        publisher: str,
        events: list[Event],
        now: int | None = None,
        publish_id: str | None = None,
        fingerprint: str = "",
        trace: TraceContext | None = None,
    ) -> Queued:
        """Queue events for every subscriber.

        The topic step also checks that the publisher's token exists, so the hot path
        needs no separate lookup and a token deleted mid-request cannot publish. A
        client's publish id counts only for its own publishes to this topic (scoped());
        the same id again with another `fingerprint` (a digest of the request body) is
        refused (Unprocessable): its events would otherwise be dropped as a repeat."""
        if not events:
            return Queued(0, ())
        k = self._keys
        now = now or now_ms()
        scoped_id = scoped(publisher, topic, publish_id) if publish_id else ""
        window = self._window_s
        if not scoped_id and self._cluster:
            scoped_id, window = uuid.uuid4().hex, MADE_UP_ID_S
        deadline = time.monotonic() + RETRY_S
        filters = self._filters.get(topic)
        checked: list[int | None] | None = None
        for _ in range(FILTER_TRIES):
            versions, filters = self._checked(topic, events, filters)
            if versions != checked:  # packed again only when a schema version changed
                checked = versions
                bodies = [
                    (e.type, e.url, e.ordering_key, e.pack(topic, trace, v))
                    for e, v in zip(events, versions, strict=True)
                ]
            packed = matched(bodies, events, filters)
            p = Publish(topic, publisher, now, self._default_ttl_ms, scoped_id, window, packed,
                        filters.version)  # fmt: skip
            per = self._per_script(len(events), sum(len(body[3]) for body in bodies))
            budget = 0 if scoped_id or not self._budget else per * len(events)
            call = calls.publish(k, p, budget, fingerprint, self._rate, self._burst)
            run = functools.partial(self._topic, call)
            step = retried(run, deadline) if scoped_id else run()
            if step.status is not Published.FILTERS_CHANGED:
                break
            filters = self._filters.load(topic)
        else:
            raise Busy(
                f"the content filters or schemas of topic {topic} kept changing during the "
                "publish; "
                "nothing was queued: publish again",
                1000,
            )
        queued = step.queued
        if step.status is Published.UNKNOWN_TOKEN:
            raise Unauthorized("unknown API token")
        if step.status is Published.NOT_PUBLISHER:
            raise Forbidden(f"topic {topic} belongs to another publisher")
        if step.status is Published.KEY_REUSED:
            raise Unprocessable(
                "Idempotency-Key was already used with another body within "
                f"BUSBAR_PUBLISH_DEDUPE_S ({self._window_s} s); use a new key for new events"
            )
        if step.status is Published.RATE_LIMITED:
            raise RateLimited(
                f"publisher over its rate (BUSBAR_PUBLISH_RATE, {self._rate} events/s); "
                f"retry in {max(1, -(-queued // 1000))} s",
                queued,
            )
        shards = self._shard_steps(step, p, per, deadline)
        if step.status is Published.REPEAT:  # the first try may have written elsewhere
            return Queued(queued + shards.pairs, (k.catalog, *k.all_shards()))  # (other filters)
        return Queued(queued + shards.pairs, (k.catalog, *shards.places))

    def _per_script(self, events: int, size: int) -> int:
        """Subscribers one script queues `events` events of `size` bytes in all for: as
        many as the budgets of appends and of bytes allow, at least one."""
        return max(1, min(self._budget // events, self._budget_bytes // max(1, size)))

    def _shard_steps(self, step: TopicStep, p: Publish, size: int, deadline: float) -> Queued:
        """The shard steps for the subscribers the topic step left (in shard order), each
        for `size` of them (within the budgets); on one Redis the topic step queues too:
        one node, one fence."""
        queued, places = 0, []
        for shard, members in groupby(step.left, key=lambda m: int(m[1].split(b"|", 1)[0])):
            listed = list(members)
            places.append(self._keys.shard(shard))
            for i in range(0, len(listed), size):
                shard_call = calls.publish_queue(places[-1], p, listed[i : i + size])
                step_run = functools.partial(self._scripts.run, shard_call)
                queued += retried(step_run, deadline) if p.scoped_id else step_run()
        return Queued(queued, tuple(places))
