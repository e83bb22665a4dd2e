"""Routes: which events of a topic a subscriber takes, on which priority lane, for how long.

A `topics` entry is a legacy topic name or a route object. Route objects naming a topic
override legacy names of the same topic. Each event goes to one route per subscriber:
the highest-priority route whose `types` include the event's type (the first listed on
a tie) and whose content `filter`, if it has one, the event matches. Without filters the
choice is made once here, at subscribe time, and ingest only looks it up; with them,
the route table lists the candidates in that order, the web matches each event against
the filters (app/services/topic_rules.py) and ingest takes the first that holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.codec import EVENT_TYPES, RouteEntry
from app.errors import InvalidInput
from app.models.fields import Boolean, ChoiceList, Doc, Field, Integer, Rules, Shape, TopicName
from app.models.filters import Filter, parse_filter
from app.models.keys import LEGACY_LANE
from app.models.transform import Transform, parse_transform


@dataclass(frozen=True)
class ContentFilter(Field):
    """A route's `filter` (app/models/filters.py), bounded by BUSBAR_FILTER_MAX_*."""

    description: str = (
        "only the events this content filter matches (docs/filters.md); null or absent: every event"
    )
    nullable: bool = True  # GET /subscriptions lists a route without one as "filter": null

    def check(self, value: Any, where: str, rules: Rules) -> Filter:
        return parse_filter(value, where, rules.filters)

    def shape(self, rules: Rules) -> Doc:
        return {"$ref": "#/components/schemas/Filter"}


@dataclass(frozen=True)
class TransformField(Field):
    """A route's `transform` (app/models/transform.py), compiled once here: a syntax
    error is a 400 naming its character, and one over BUSBAR_TRANSFORM_MAX_BYTES too."""

    description: str = (
        "a JSONata expression whose output replaces each event's data for this route "
        "(docs/transforms.md); null or undefined drops the event; null or absent: none"
    )
    nullable: bool = True

    def check(self, value: Any, where: str, rules: Rules) -> Transform:
        return parse_transform(value, where, *rules.transforms)

    def shape(self, rules: Rules) -> Doc:
        return {"type": "string", "minLength": 1, "maxLength": rules.transforms[0]}


MAX_TTL = 10 * 365 * 86400
# A route as GET /subscriptions lists it can be posted back: the nulls it shows
# (priority, ttl, filter) are taken and mean what leaving them out means; `types` and
# `coalesce`, never listed as null, refuse one, naming the field (docs/api.md, Nulls).
ROUTE = Shape(
    {
        "topic": TopicName(),
        "priority": Integer(0, 9, nullable=True,
                            description="0 is delivered first; null or absent: no priority, "
                            "after 9"),
        "ttl": Integer(1, MAX_TTL, nullable=True,
                       description="seconds an event may wait; null or absent: "
                       "BUSBAR_DEFAULT_TTL"),
        "types": ChoiceList(EVENT_TYPES, what="event types",
                            description="absent: every type"),
        "coalesce": Boolean(description="a newer event for a queued url replaces it; "
                            "absent: false"),
        "filter": ContentFilter(),
        "transform": TransformField(),
    },
    required=("topic",),
    left_out={"types": "for every type"},
)  # fmt: skip


@dataclass(frozen=True)
class Route:
    topic: str
    lane: int = LEGACY_LANE
    ttl: int = 0  # seconds; 0: BUSBAR_DEFAULT_TTL applies
    types: tuple[str, ...] = EVENT_TYPES
    coalesce: bool = False
    legacy: bool = False
    content: Filter | None = None  # the route's `filter`
    transform: Transform | None = None  # the route's `transform`

    def describe(self) -> dict[str, Any]:
        """The route as GET /subscriptions shows it."""
        return {
            "topic": self.topic,
            "priority": None if self.lane == LEGACY_LANE else self.lane,
            "ttl": self.ttl or None,
            "types": list(self.types),
            "coalesce": self.coalesce,
            "filter": None if self.content is None else self.content.source,
            "transform": None if self.transform is None else self.transform.source,
        }


def parse_route(raw: Any, where: str, rules: Rules) -> Route:
    fields = ROUTE.fields
    if isinstance(raw, str):
        return Route(topic=fields["topic"].check(raw, where, rules), legacy=True)
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where} must be a topic name or a route object")
    ROUTE.known(raw, where)
    if "topic" not in raw:
        raise InvalidInput(f"{where}.topic is required")

    def given(name: str, default: Any) -> Any:
        value = ROUTE.given(raw, name, f"{where}.{name}", rules)
        return default if value is None else value

    return Route(
        topic=fields["topic"].check(raw["topic"], f"{where}.topic", rules),
        lane=given("priority", LEGACY_LANE),
        ttl=given("ttl", 0),
        types=given("types", EVENT_TYPES),
        coalesce=given("coalesce", False),
        content=given("filter", None),
        transform=given("transform", None),
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
        routes = [parse_route(e, f"{where}[{i}]", rules) for i, e in enumerate(value)]
        return effective_routes(routes)

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


Taken = tuple[int, int, bool]  # lane, ttl, coalesce
Candidate = tuple[int, int, bool, int]  # and the number of its filter (0: none)


def route_tables(routes: list[Route]) -> dict[str, dict[str, RouteEntry]]:
    """topic -> event type -> the one route that event takes, (lane, ttl, coalesce); or,
    when a content filter may decide, the candidates in the order they are tried
    (priority, then as listed), each with its filter's number on the topic (from 1, as
    filter_lists() numbers them; 0: none), up to the first without a filter, which
    takes whatever reaches it."""
    numbers = {id(r): n for rs in filtered_routes(routes).values() for n, r in enumerate(rs, 1)}
    by_topic: dict[str, list[Route]] = {}
    for r in routes:
        by_topic.setdefault(r.topic, []).append(r)
    tables: dict[str, dict[str, RouteEntry]] = {}
    for topic, listed in by_topic.items():
        ordered = sorted(enumerate(listed), key=lambda pair: (pair[1].lane, pair[0]))
        table: dict[str, RouteEntry] = {}
        for t in EVENT_TYPES:
            candidates: list[Candidate] = []
            for _, r in ordered:
                if t in r.types:
                    candidates.append((r.lane, r.ttl, r.coalesce, numbers.get(id(r), 0)))
                    if candidates[-1][3] == 0:
                        break
            if len(candidates) == 1 and candidates[0][3] == 0:
                table[t] = candidates[0][:3]
            elif candidates:
                table[t] = candidates
        tables[topic] = table
    return tables


def filtered_routes(routes: list[Route]) -> dict[str, list[Route]]:
    """topic -> its routes with a content filter, as listed: their numbers from 1."""
    found: dict[str, list[Route]] = {}
    for r in routes:
        if r.content is not None:
            found.setdefault(r.topic, []).append(r)
    return found


def filter_lists(routes: list[Route]) -> dict[str, str]:
    """topic -> the JSON list of its routes' filters in number order, for the topic's
    filters hash (lib/filters.lua); topics without one are left out."""
    return {
        topic: json.dumps([r.content.source for r in rs if r.content is not None])
        for topic, rs in filtered_routes(routes).items()
    }


def transform_table(routes: list[Route]) -> str:
    """The subscriber hash's `transforms` (JSON; '' when no route has one): for each
    topic one of whose routes transforms, every route of it as listed, `[lane, types,
    filter, transform]`. A worker finds an event's route again from its topic, type and
    the lane it was queued on (app/delivery/shaping.py): the first of them on that lane
    for its type whose filter, if any, the event matches, as route_tables() ordered
    them, since routes of one lane keep the order they were listed in."""
    topics = {r.topic for r in routes if r.transform is not None}
    if not topics:
        return ""
    table: dict[str, list[list[Any]]] = {}
    for r in routes:
        if r.topic in topics:
            table.setdefault(r.topic, []).append([
                r.lane, list(r.types), None if r.content is None else r.content.source,
                None if r.transform is None else r.transform.source,
            ])  # fmt: skip
    return json.dumps(table, separators=(",", ":"), sort_keys=True)
