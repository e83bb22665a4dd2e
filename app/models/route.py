"""Routes: which events of a topic a subscriber takes, on which priority lane, for how long.

A `topics` entry is a legacy topic name or a route object. Route objects naming a topic
override legacy names of the same topic. Each event goes to one route per subscriber:
the highest-priority route whose `types` include the event's type (the first listed on
a tie), so the choice is made once here, at subscribe time, and ingest only looks it up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.codec import EVENT_TYPES
from app.errors import InvalidInput
from app.models import validate

LEGACY_LANE = 10  # below priority 9: routes without a priority, and plain topic names
ROUTE_KEYS = {"topic", "priority", "ttl", "types", "coalesce"}
MAX_TTL = 10 * 365 * 86400


@dataclass(frozen=True)
class Route:
    topic: str
    lane: int = LEGACY_LANE
    ttl: int = 0  # seconds; 0: BUSBAR_DEFAULT_TTL applies
    types: tuple[str, ...] = EVENT_TYPES
    coalesce: bool = False
    legacy: bool = False

    def describe(self) -> dict[str, Any]:
        """The route as GET /subscriptions shows it."""
        return {
            "topic": self.topic,
            "priority": None if self.lane == LEGACY_LANE else self.lane,
            "ttl": self.ttl or None,
            "types": list(self.types),
            "coalesce": self.coalesce,
        }


def parse_route(raw: Any, where: str) -> Route:
    if isinstance(raw, str):
        return Route(topic=validate.topic_name(raw, where), legacy=True)
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where} must be a topic name or a route object")
    validate.known_keys(raw, ROUTE_KEYS, where)
    if "topic" not in raw:
        raise InvalidInput(f"{where}.topic is required")
    topic = validate.topic_name(raw["topic"], f"{where}.topic")
    priority = raw.get("priority")
    lane = (
        LEGACY_LANE if priority is None else validate.integer(priority, f"{where}.priority", 0, 9)
    )
    ttl = raw.get("ttl")
    ttl = 0 if ttl is None else validate.integer(ttl, f"{where}.ttl", 1, MAX_TTL)
    types = raw.get("types")
    if types is None:
        types = list(EVENT_TYPES)
    if not isinstance(types, list) or not types:
        raise InvalidInput(f"{where}.types must be a non-empty list of event types")
    for t in types:
        if t not in EVENT_TYPES:
            raise InvalidInput(f"{where}.types may only hold {', '.join(EVENT_TYPES)}")
    coalesce = raw.get("coalesce", False)
    if not isinstance(coalesce, bool):
        raise InvalidInput(f"{where}.coalesce must be true or false")
    ordered = tuple(t for t in EVENT_TYPES if t in types)
    return Route(topic=topic, lane=lane, ttl=ttl, types=ordered, coalesce=coalesce)


def effective_routes(routes: list[Route]) -> list[Route]:
    """Drop legacy names of topics that route objects also name, and repeated names."""
    with_objects = {r.topic for r in routes if not r.legacy}
    kept: list[Route] = []
    seen_legacy: set[str] = set()
    for r in routes:
        if r.legacy:
            if r.topic in with_objects or r.topic in seen_legacy:
                continue
            seen_legacy.add(r.topic)
        kept.append(r)
    return kept


def route_tables(routes: list[Route]) -> dict[str, dict[str, tuple[int, int, bool]]]:
    """topic -> event type -> (lane, ttl, coalesce) of the one route that event takes."""
    tables: dict[str, dict[str, tuple[int, int, bool]]] = {}
    for r in routes:
        table = tables.setdefault(r.topic, {})
        for t in r.types:
            if t not in table or r.lane < table[t][0]:
                table[t] = (r.lane, r.ttl, r.coalesce)
    return tables
