"""The publish scripts' KEYS and ARGV and their replies: publish (the topic step),
publish_queue (a shard's step) and replay_queue (a step of a lake replay), each built
in one place. spec/app/models/test_script_calls.py checks them against their headers."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, NamedTuple

from app.codec import EVENT_TYPES
from app.lua.call import Call
from app.models.keys import MAIN, Keys, Place
from app.redis_client import text


class Published(enum.IntEnum):
    """publish.lua's status."""

    OK = 1
    REPEAT = 2  # ok, and the publish id was seen before (counted then)
    NOT_PUBLISHER = -1  # the topic belongs to another publisher
    UNKNOWN_TOKEN = -2  # deleted before or while the request ran
    KEY_REUSED = -3  # the publish id was seen with another fingerprint
    RATE_LIMITED = -4  # over its rate; nothing written
    FILTERS_CHANGED = -5  # the topic's filters are at another version; nothing written


class TopicStep(NamedTuple):
    status: Published
    # events queued here; with RATE_LIMITED, ms until the bucket holds them; with
    # FILTERS_CHANGED, the topic's filters version
    queued: int
    left: list[tuple[str, bytes]]  # (token, `<shard>|<route table>`) for the shard steps


def _topic_step(reply: Any) -> TopicStep:
    status, queued, *rest = reply
    pairs = [(text(rest[i]), rest[i + 1]) for i in range(0, len(rest), 2)]
    return TopicStep(Published(status), int(queued), pairs)


@dataclass(frozen=True)
class Publish:
    """What a publish's steps share (app/services/ingest.py)."""

    topic: str
    publisher: str
    now: int
    ttl_ms: int  # the default ttl, 0: none
    scoped_id: str  # the publish id scoped to its publisher and topic, '' for none
    window_s: int  # how long the id is remembered
    # five values an event: type, url, ordering key, packed event, the filters it matched
    packed: list[object]
    filters: int = 0  # the topic's filters version they were matched against


def publish(
    keys: Keys, p: Publish, budget: int, fingerprint: str, rate: int, burst: int
) -> Call[TopicStep]:
    return Call(
        "publish",
        [
            keys.topics, keys.topic(p.topic), keys.topic_subscribers(p.topic),
            keys.catalog.counters, keys.tokens, keys.catalog.published(p.scoped_id),
            keys.catalog.rate(p.publisher), keys.aliases,
        ],
        [
            keys.prefix, p.topic, p.publisher, p.now, p.ttl_ms, budget, p.scoped_id, p.window_s,
            fingerprint, rate, burst, p.filters, *p.packed,
        ],
        _topic_step,
    )  # fmt: skip


def _queued(reply: Any) -> int:
    return max(0, int(reply))  # -1: this step had run already, nothing queued now


def publish_queue(place: Place, p: Publish, named: list[tuple[str, bytes]]) -> Call[int]:
    """Reads the events queued (0 when this step had run already)."""
    once = place.published(f"{p.scoped_id}:{named[0][0]}")  # the step, within the window
    keys = [place.counters, *place.job_states(MAIN), once]
    flat = [value for pair in named for value in pair]
    head = [place.base, p.now, p.ttl_ms, p.scoped_id, p.window_s, len(named)]
    return Call("publish_queue", keys, [*head, *flat, *p.packed], _queued)


class Replayed(enum.IntEnum):
    QUEUED = 1
    GONE = -1  # the subscriber is gone
    MOVED_ON = -2  # the position moved on meanwhile (this step already ran)


class ReplayStep(NamedTuple):
    status: Replayed
    queued: int
    position: int  # after the step


def _replay_step(reply: Any) -> ReplayStep:
    queued, after = int(reply[0]), int(reply[1])
    if queued < 0:
        return ReplayStep(Replayed(queued), 0, after)
    return ReplayStep(Replayed.QUEUED, queued, after)


@dataclass(frozen=True)
class ReplayRows:
    """One step's share of a replay's selection."""

    replay: str  # its id
    position: int  # the position the caller read
    consumed: int  # rows of the selection this step consumes
    lane: int
    ttl_ms: int  # 0: none
    events: list[bytes]  # packed, their original ids given


def replay_queue(keys: Keys, token: str, now: int, rows: ReplayRows) -> Call[ReplayStep]:
    home = keys.home(token)
    return Call(
        "replay_queue",
        [keys.subscriber(token), home.event_gauge, home.batch_gauge, home.counters,
         *home.job_states(MAIN), home.replay(rows.replay)],
        [home.base, token, now, rows.replay, rows.position, rows.lane, rows.ttl_ms,
         rows.consumed, *rows.events],
        _replay_step,
    )  # fmt: skip


class TopicFilterLists(NamedTuple):
    """What topic_filters.lua read: the topic's rules version, and, unless the caller
    held that version, its content filters and the current schema of each type."""

    version: int  # 0: the topic never had filters or schemas
    lists: dict[str, bytes] | None  # token -> JSON list; None: the version known is current
    # (type, schema version, `<at>|<deprecated>|<schema JSON>`) of each type that has one
    schemas: tuple[tuple[str, int, bytes], ...] = ()


def _filter_lists(reply: Any) -> TopicFilterLists:
    version = int(reply[0])
    if len(reply) == 1:
        return TopicFilterLists(version, None)
    flat, found = reply[1], reply[2]
    lists = {text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}
    schemas = tuple(
        (text(found[i]), int(found[i + 1]), found[i + 2]) for i in range(0, len(found), 3)
    )
    return TopicFilterLists(version, lists, schemas)


def topic_filters(keys: Keys, topic: str, known: int | None) -> Call[TopicFilterLists]:
    """The topic's rules (content filters and schemas) and their version; `known`, the
    version the caller holds (None: none), which when current comes back alone."""
    return Call(
        "topic_filters",
        [keys.topic(topic), keys.topic_filters(topic), keys.topic_schemas(topic)],
        ["" if known is None else known, *EVENT_TYPES],
        _filter_lists,
    )
