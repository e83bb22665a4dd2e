"""The rules of a topic, as a publishing process checks events against them: its
subscribers' content filters and the JSON Schema of each event type.

Filters are evaluated here, in the process that took the publish, never in Lua: a
subscriber's filter is parsed once into closures (app/models/filters.py), and `$regex`
runs on RE2, which Lua has no equal of. Each publish names the filters version it
matched against; publish.lua refuses it (nothing written) when the topic's filters have
changed since, and the process loads them again and matches again. So a topic that never
had a filter costs a publish nothing more, the filters are read from Redis once per
change, not per publish, and no event is ever matched against filters that no longer
hold (docs/filters.md, How it works).

What the matching gives publish.lua, per event: ' <token>=1,3' for each subscriber whose
filters 1 and 3 (numbered as app/models/route.py numbers them) the event matched.
Schemas ride on the same version (lib/schemas.lua): a publish is checked against the
schema current when its script runs, never one replaced meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.errors import InvalidInput
from app.lua import Scripts
from app.models.event import Event
from app.models.filters import Bounds, Filter, parse_filter
from app.models.keys import Keys
from app.models.publish_calls import topic_filters
from app.models.schemas import TypeSchema, stored_schema

# A stored filter was bounded by the settings when it was subscribed; they may have
# changed since, and a stored filter must still be matched, so it is read back loosely.
STORED = Bounds(max_bytes=1 << 20, max_depth=64, max_conditions=1 << 16)
KEPT_TOPICS = 10_000  # topics whose filters one process keeps; past it, it starts again


@dataclass(frozen=True)
class TopicFilters:
    version: int  # 0: the topic has never had a filter
    distinct: tuple[Filter, ...]  # each filter the topic's subscribers use, once
    # token, and the index in `distinct` of each of its filters, in number order
    subscribers: tuple[tuple[str, tuple[int, ...]], ...]
    schemas: Mapping[str, TypeSchema] = field(default_factory=dict)  # type -> current

    def matched(self, view: Mapping[str, Any]) -> str:
        """publish.lua's fifth value for an event, given as a filter sees it (view_of,
        Event.view). A filter many subscribers share is matched once."""
        if not self.subscribers:
            return ""
        holds = [f.matches(view) for f in self.distinct]
        found = []
        for token, indexes in self.subscribers:
            hits = [str(n) for n, i in enumerate(indexes, 1) if holds[i]]
            if hits:
                found.append(f" {token}={','.join(hits)}")
        return "".join(found)

    def checked(self, topic: str, events: Sequence[Event]) -> list[int | None]:
        """The schema version each event's data was checked against (None: its type has
        no schema); InvalidInput naming the first event that breaks its schema, where in
        its data and the rule, so a bulk publish is refused whole."""
        if not self.schemas:
            return [None] * len(events)
        versions: list[int | None] = []
        for i, event in enumerate(events):
            schema = self.schemas.get(event.type)
            if schema is None:
                versions.append(None)
                continue
            broken = schema.broken(event.data)
            if broken is not None:
                raise InvalidInput(
                    f"event {i} breaks the {event.type} schema of topic {topic} (version "
                    f"{schema.version}) at data{broken.pointer}: {broken.message} "
                    f"(rule {broken.rule or '/'})"
                )
            versions.append(schema.version)
        return versions

    @property
    def by_subscriber(self) -> dict[str, tuple[Filter, ...]]:
        """token -> its filters, in number order."""
        return {t: tuple(self.distinct[i] for i in ix) for t, ix in self.subscribers}


NONE = TopicFilters(0, (), ())


def parse_schemas(found: Sequence[tuple[str, int, bytes]]) -> dict[str, TypeSchema]:
    """topic_filters.lua's schemas, `<at>|<deprecated>|<schema JSON>` each, compiled."""
    schemas = {}
    for type_, number, stored in found:
        _at, deprecated, text = stored.decode().split("|", 2)
        schemas[type_] = stored_schema(number, text, deprecated == "1")
    return schemas


def parse_stored(
    version: int,
    lists: Mapping[str, bytes],
    schemas: Sequence[tuple[str, int, bytes]] = (),
) -> TopicFilters:
    """The topic's filters hash as TopicFilters holds it: tokens in order (every process
    builds the same string), and a filter written alike by several subscribers parsed and
    matched once."""
    distinct: list[Filter] = []
    seen: dict[str, int] = {}
    subscribers = []
    for token in sorted(lists):
        indexes = []
        for source in json.loads(lists[token]):
            canonical = json.dumps(source, sort_keys=True, separators=(",", ":"))
            if canonical not in seen:
                seen[canonical] = len(distinct)
                distinct.append(parse_filter(source, "a stored filter", STORED))
            indexes.append(seen[canonical])
        subscribers.append((token, tuple(indexes)))
    return TopicFilters(version, tuple(distinct), tuple(subscribers), parse_schemas(schemas))


class FilterCache:
    """One per process (each web process, each worker's Operations relay)."""

    def __init__(self, keys: Keys, scripts: Scripts) -> None:
        self._keys = keys
        self._scripts = scripts
        self._topics: dict[str, TopicFilters] = {}

    def get(self, topic: str) -> TopicFilters:
        return self._topics.get(topic, NONE)

    def load(self, topic: str) -> TopicFilters:
        """The topic's filters as Redis holds them now (after a publish was refused for
        naming another version)."""
        held = self._topics.get(topic)
        read = self._scripts.run(
            topic_filters(self._keys, topic, None if held is None else held.version)
        )
        if read.lists is None and held is not None:
            return held
        fresh = parse_stored(read.version, read.lists or {}, read.schemas)
        if len(self._topics) >= KEPT_TOPICS:
            self._topics.clear()
        self._topics[topic] = fresh
        return fresh
