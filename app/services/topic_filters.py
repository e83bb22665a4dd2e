"""The content filters of a topic, as a publishing process matches events against them.

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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.lua import Scripts
from app.models.filters import Bounds, Filter, parse_filter
from app.models.keys import Keys
from app.models.publish_calls import topic_filters

# A stored filter was bounded by the settings when it was subscribed; they may have
# changed since, and a stored filter must still be matched, so it is read back loosely.
STORED = Bounds(max_bytes=1 << 20, max_depth=64, max_conditions=1 << 16)
KEPT_TOPICS = 10_000  # topics whose filters one process keeps; past it, it starts again


@dataclass(frozen=True)
class TopicFilters:
    version: int  # 0: the topic has never had a filter
    subscribers: tuple[tuple[str, tuple[Filter, ...]], ...]  # token, its filters by number

    def matched(self, view: Mapping[str, Any]) -> str:
        """publish.lua's fifth value for an event, given as a filter sees it (view_of,
        Event.view)."""
        if not self.subscribers:
            return ""
        found = []
        for token, filters in self.subscribers:
            hits = [str(n) for n, f in enumerate(filters, 1) if f.matches(view)]
            if hits:
                found.append(f" {token}={','.join(hits)}")
        return "".join(found)


NONE = TopicFilters(0, ())


def parse_stored(lists: Mapping[str, bytes]) -> tuple[tuple[str, tuple[Filter, ...]], ...]:
    """The topic's filters hash, as TopicFilters holds it (tokens in order, so every
    process builds the same string)."""
    found = []
    for token in sorted(lists):
        sources = json.loads(lists[token])
        filters = tuple(parse_filter(s, "a stored filter", STORED) for s in sources)
        found.append((token, filters))
    return tuple(found)


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
        fresh = TopicFilters(read.version, parse_stored(read.lists or {}))
        if len(self._topics) >= KEPT_TOPICS:
            self._topics.clear()
        self._topics[topic] = fresh
        return fresh
