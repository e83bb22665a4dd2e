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
from app.models.keys import LEGACY_LANE
from app.models.schema import Boolean, ChoiceList, Doc, Field, Integer, Rules, Shape, TopicName

MAX_TTL = 10 * 365 * 86400
ROUTE = Shape(
    {
        "topic": TopicName(),
        "priority": Integer(0, 9, nullable=True, description="0 is delivered first"),
        "ttl": Integer(1, MAX_TTL, nullable=True, description="seconds an event may wait"),
        "types": ChoiceList(EVENT_TYPES, what="event types", nullable=True),
        "coalesce": Boolean(description="a newer event for a queued url replaces it"),
    },
    required=("topic",),
)


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
    fields, rules = ROUTE.fields, Rules()
    if isinstance(raw, str):
        return Route(topic=fields["topic"].check(raw, where, rules), legacy=True)
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where} must be a topic name or a route object")
    ROUTE.known(raw, where)
    if "topic" not in raw:
        raise InvalidInput(f"{where}.topic is required")

    def given(name: str, default: Any) -> Any:
        value = raw.get(name)
        return default if value is None else fields[name].check(value, f"{where}.{name}", rules)

    return Route(
        topic=fields["topic"].check(raw["topic"], f"{where}.topic", rules),
        lane=given("priority", LEGACY_LANE),
        ttl=given("ttl", 0),
        types=given("types", EVENT_TYPES),
        coalesce=fields["coalesce"].check(raw.get("coalesce", False), f"{where}.coalesce", rules),
    )


# Topic names and route objects one subscription may list: its two steps are one Lua
# script each, over every topic it names, which every other Redis client waits for.
MAX_ROUTES = 1000


@dataclass(frozen=True)
class Routes(Field):
    """A subscription's `topics`: topic names (Routemaster's) and route objects, mixed."""

    description: str = "topic names, or route objects; a route object overrides a name"

    def check(self, value: Any, where: str, rules: Rules) -> list[Route]:
        if not isinstance(value, list):
            raise InvalidInput(f"{where} must be a list of topic names or route objects")
        if len(value) > MAX_ROUTES:
            raise InvalidInput(
                f"{where} holds at most {MAX_ROUTES:,} topic names and route objects; "
                f"this one holds {len(value):,}"
            )
        return effective_routes([parse_route(e, f"{where}[{i}]") for i, e in enumerate(value)])

    def shape(self, rules: Rules) -> Doc:
        items = {"oneOf": [ROUTE.fields["topic"].openapi(rules), ROUTE.openapi(rules)]}
        return {"type": "array", "items": items, "maxItems": MAX_ROUTES}


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
