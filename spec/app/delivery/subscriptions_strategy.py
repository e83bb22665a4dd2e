"""Random valid subscriptions, the events published to them and the receiver that takes
them, for spec/app/delivery/test_random_subscriptions.py; and the model of what must
arrive (docs/semantics.md, docs/routes.md, docs/filters.md), which that test checks
the engine against.

A drawn Case is abstract: names, urls, the receivers' addresses and the client
certificate are given when it runs (Names), so one draw means the same thing in every
run. Content filters are drawn with their meaning beside them (a predicate written here,
from docs/filters.md's table), so what a filter keeps is not asked of busbar's own
evaluator.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from app.codec import EVENT_TYPES
from app.models import partitions
from app.models.keys import LEGACY_LANE
from spec.integration.subscriber import CLOSE

View = dict[str, Any]  # what a filter sees of an event: type, url, key, data
Predicate = Callable[[View], bool]
COUNTRIES = ("FR", "BE", "DE")
URLS = 2  # https://o.test/u0, u1: few, so a url's events meet (coalescing, order)
KEYS = ("k0", "k1", "k2")
AGES_MS = (0, 0, 0, 5_000, 100_000)  # how long ago an event was published
TTLS = (1, 2, 60, 3600)
# a route's transform (docs/transforms.md), by name: each keeps `i`, what the checks read
TRANSFORMS = {
    "mark": "$merge([data, {'via': 'route'}])",  # every event, shaped
    "drop": "data.n = 3 ? null : $merge([data, {'via': 'route'}])",  # gives nothing for n 3
}
MAX_TOPICS = 2


@dataclass(frozen=True)
class Filter:
    source: dict[str, Any]
    holds: Predicate = field(compare=False)

    def __repr__(self) -> str:  # what a falsifying example prints
        return json.dumps(self.source)


def _field(view: View, path: str) -> tuple[bool, Any]:
    """(present, value) of `type`, `url`, `key` or `data.<name>`."""
    if path.startswith("data."):
        data = view.get("data")
        name = path[5:]
        if not isinstance(data, dict) or name not in data:
            return False, None
        return True, data[name]
    return (path in view), view.get(path)


def _number(test: Callable[[int, Any], bool]) -> Callable[[Any, Any], bool]:
    """$gt and its kin: numbers with numbers only (the drawn values are numbers)."""
    return lambda got, value: (
        isinstance(got, int) and not isinstance(got, bool) and test(got, value)
    )


# what each operator asks of a field that is there (docs/filters.md's table)
OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda got, value: bool(got == value),
    "$neq": lambda got, value: bool(got != value),
    "$in": lambda got, value: got in value,
    "$nin": lambda got, value: got not in value,
    "$gt": _number(lambda got, value: got > value),
    "$gte": _number(lambda got, value: got >= value),
    "$lt": _number(lambda got, value: got < value),
    "$lte": _number(lambda got, value: got <= value),
    "$prefix": lambda got, value: isinstance(got, str) and got.startswith(value),
    "$suffix": lambda got, value: isinstance(got, str) and got.endswith(value),
    # the patterns drawn are ^ and a class of first letters: ^[FB]
    "$regex": lambda got, value: isinstance(got, str) and got[:1] in value[2:-1],
}
ABSENT_HOLDS = {"$neq", "$nin"}  # "an absent field matches only $neq, $nin, $exist: false"


def _leaf(path: str, op: str, value: Any) -> Filter:
    """One condition, as docs/filters.md's table says it holds."""

    def holds(view: View) -> bool:
        present, got = _field(view, path)
        if op == "$exist":
            return present is value
        if not present:
            return op in ABSENT_HOLDS
        return OPERATORS[op](got, value)

    source = {path: value} if op == "$eq" else {path: {op: value}}
    return Filter(source, holds)


def _leaves() -> st.SearchStrategy[Filter]:
    countries = st.lists(st.sampled_from(COUNTRIES), min_size=1, max_size=2, unique=True)
    return st.one_of(
        st.sampled_from(COUNTRIES).map(lambda c: _leaf("data.c", "$eq", c)),
        st.tuples(st.sampled_from(["$in", "$nin"]), countries).map(
            lambda p: _leaf("data.c", p[0], p[1])
        ),
        st.tuples(st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), st.integers(0, 9)).map(
            lambda p: _leaf("data.n", p[0], p[1])
        ),
        st.booleans().map(lambda b: _leaf("data.n", "$exist", b)),
        st.tuples(st.sampled_from(["$eq", "$neq"]), st.sampled_from(EVENT_TYPES)).map(
            lambda p: _leaf("type", p[0], p[1])
        ),
        st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True).map(
            lambda ks: _leaf("key", "$in", ks)
        ),
        st.sampled_from(KEYS).map(lambda k: _leaf("key", "$prefix", k)),
        st.integers(0, URLS - 1).map(lambda j: _leaf("url", "$suffix", f"/u{j}")),
        st.sampled_from(["FB", "D", "BD"]).map(lambda s: _leaf("data.c", "$regex", f"^[{s}]")),
        st.just(Filter({}, lambda _: True)),
    )


def _not(inner: Filter) -> Filter:
    return Filter({"$not": inner.source}, lambda v: not inner.holds(v))


def _any(inner: list[Filter]) -> Filter:
    return Filter({"$or": [f.source for f in inner]}, lambda v: any(f.holds(v) for f in inner))


def _all(inner: list[Filter]) -> Filter:
    return Filter({"$and": [f.source for f in inner]}, lambda v: all(f.holds(v) for f in inner))


def filters() -> st.SearchStrategy[Filter]:
    return st.recursive(
        _leaves(),
        lambda inner: st.one_of(
            inner.map(_not),
            st.lists(inner, min_size=1, max_size=2).map(_any),
            st.lists(inner, min_size=1, max_size=2).map(_all),
        ),
        max_leaves=3,
    )


@dataclass(frozen=True)
class RouteDraw:
    priority: int | None
    ttl: int | None
    types: tuple[str, ...] | None
    coalesce: bool
    filter: Filter | None
    transform: str | None = None  # a name of TRANSFORMS

    @property
    def lane(self) -> int:
        return LEGACY_LANE if self.priority is None else self.priority

    def drops(self, event: EventDraw) -> bool:
        """Whether its transform gives nothing for an event it takes: never sent."""
        return self.transform == "drop" and event.n == 3

    def shaped(self, data: dict[str, Any]) -> dict[str, Any]:
        """The data its subscriber receives for an event's data as published."""
        return data if self.transform is None else {**data, "via": "route"}

    def takes(self, event: EventDraw, view: View) -> bool:
        return (self.types is None or event.type in self.types) and (
            self.filter is None or self.filter.holds(view)
        )

    def body(self, topic: str) -> dict[str, Any]:
        found: dict[str, Any] = {"topic": topic}
        if self.priority is not None:
            found["priority"] = self.priority
        if self.ttl is not None:
            found["ttl"] = self.ttl
        if self.types is not None:
            found["types"] = list(self.types)
        if self.coalesce:
            found["coalesce"] = True
        if self.filter is not None:
            found["filter"] = self.filter.source
        if self.transform is not None:
            found["transform"] = TRANSFORMS[self.transform]
        return found


def routes() -> st.SearchStrategy[RouteDraw]:
    return st.builds(
        RouteDraw,
        priority=st.sampled_from([None, None, 0, 3]),  # often a lane shared
        ttl=st.one_of(st.none(), st.sampled_from(TTLS)),
        types=st.one_of(
            st.none(),
            st.lists(st.sampled_from(EVENT_TYPES), min_size=1, max_size=3, unique=True).map(tuple),
        ),
        coalesce=st.booleans(),
        filter=st.one_of(st.none(), st.none(), filters()),  # often none: more events taken
        transform=st.sampled_from([None, None, "mark", "drop"]),
    )


@dataclass(frozen=True)
class TopicDraw:
    """A topic of the subscription: its name alone (a legacy route: every type, lane
    10), or route objects, the name listed too or not (a name beside route objects of
    its topic is dropped: route.effective_routes)."""

    objects: tuple[RouteDraw, ...]
    name_too: bool

    def effective(self) -> tuple[RouteDraw, ...]:
        return self.objects or (RouteDraw(None, None, None, False, None),)


def topics() -> st.SearchStrategy[TopicDraw]:
    objects = st.builds(
        TopicDraw, st.lists(routes(), min_size=1, max_size=3).map(tuple), st.booleans()
    )
    return st.one_of(st.just(TopicDraw((), True)), objects, objects)


@dataclass(frozen=True)
class Auth:
    type: str  # basic, jwt, oauth2; "" for none given
    audience: str | None = None  # jwt
    scope: str | None = None  # oauth2
    secret: str = ""  # oauth2's client_secret


def auths() -> st.SearchStrategy[Auth]:
    return st.one_of(
        st.just(Auth("")),
        st.just(Auth("basic")),
        st.builds(Auth, st.just("jwt"), st.one_of(st.none(), st.just("https://aud.test/in"))),
        st.builds(
            Auth,
            st.just("oauth2"),
            st.none(),
            st.one_of(st.none(), st.just("events")),
            st.text("abcdefXYZ0123456789", min_size=8, max_size=16),
        ),
    )


VALUE = st.text("abcdefghijkXYZ0123456789-_.:/", min_size=1, max_size=12)
HEADER_NAMES = ("X-Api-Key", "X-Tenant", "x-env", "X-Shop-Token")


@dataclass(frozen=True)
class Header:
    name: str
    value: str
    secret: bool


@dataclass(frozen=True)
class SubscriptionDraw:
    topics: tuple[TopicDraw, ...]
    max: int | None
    timeout: int | None
    concurrency: int | None
    max_attempts: int | None
    event_ids: bool | None
    uuid: str | None
    headers: tuple[Header, ...] | None
    auth: Auth
    client_cert: bool

    @property
    def partitions(self) -> int:
        return partitions.count(self.concurrency or 1)


def subscriptions() -> st.SearchStrategy[SubscriptionDraw]:
    headers = st.lists(
        st.builds(Header, st.sampled_from(HEADER_NAMES), VALUE, st.booleans()),
        max_size=3,
        unique_by=lambda h: h.name.lower(),
    ).map(tuple)
    return st.builds(
        SubscriptionDraw,
        topics=st.lists(topics(), min_size=1, max_size=MAX_TOPICS).map(tuple),
        max=st.one_of(st.none(), st.integers(1, 5)),
        timeout=st.one_of(st.none(), st.sampled_from([0, 0, 5, 30])),
        concurrency=st.one_of(st.none(), st.integers(1, 8)),
        max_attempts=st.one_of(st.none(), st.integers(1, 4)),
        event_ids=st.one_of(st.none(), st.booleans()),
        uuid=st.one_of(st.none(), st.text("abcdefXYZ0123456789-", min_size=1, max_size=12)),
        headers=st.one_of(st.none(), headers),
        auth=auths(),
        client_cert=st.booleans(),
    )


@dataclass(frozen=True)
class EventDraw:
    type: str
    url: int  # https://o.test/u<url>
    key: str | None  # the ordering key given, if any
    c: str | None  # data.c, if any
    n: int | None  # data.n, if any


def events() -> st.SearchStrategy[EventDraw]:
    return st.builds(
        EventDraw,
        type=st.sampled_from(EVENT_TYPES),
        url=st.integers(0, URLS - 1),
        key=st.sampled_from([None, None, *KEYS]),
        c=st.one_of(st.none(), st.sampled_from(COUNTRIES)),
        n=st.one_of(st.none(), st.integers(0, 9)),
    )


@dataclass(frozen=True)
class PublishDraw:
    topic: int  # a subscription's topic (modulo how many), MAX_TOPICS: one it lacks
    age_ms: int  # published this long ago (Ingest.publish's `now`)
    events: tuple[EventDraw, ...]
    pause: bool  # 20 ms before the next publish: batches in flight meet new events


def publishes() -> st.SearchStrategy[tuple[PublishDraw, ...]]:
    one = st.builds(
        PublishDraw,
        topic=st.sampled_from([0, 0, 0, 1, 1, MAX_TOPICS]),
        age_ms=st.sampled_from(AGES_MS),
        events=st.lists(events(), min_size=1, max_size=8).map(tuple),
        pause=st.booleans(),
    )
    return st.lists(one, min_size=1, max_size=5).map(tuple)


@dataclass(frozen=True)
class ReceiverDraw:
    """How the receiver answers a request whose credentials are right: the first
    `fail_first` attempts of each batch (by webhook-id) with `fail_status`, then
    `ok_status`, each after `delay_ms`. Wrong credentials: 401, always."""

    fail_first: int
    fail_status: int  # 500, 503 (no Retry-After: a failure) or CLOSE
    ok_status: int
    delay_ms: int


def receivers() -> st.SearchStrategy[ReceiverDraw]:
    return st.builds(
        ReceiverDraw,
        fail_first=st.sampled_from([0, 0, 0, 1, 2]),
        fail_status=st.sampled_from([500, 503, CLOSE]),
        ok_status=st.sampled_from([200, 202, 204]),
        delay_ms=st.sampled_from([0, 2, 10]),
    )


@dataclass(frozen=True)
class Case:
    subscription: SubscriptionDraw
    publishes: tuple[PublishDraw, ...]
    receiver: ReceiverDraw

    @property
    def aside(self) -> bool:
        """Whether a batch may step aside (8e2f5f7): at `concurrency` > 1, one that fails
        twice in a row moves to the aside partition with its keys' later events, where
        keys of every partition may share a batch (docs/semantics.md)."""
        return (self.subscription.concurrency or 1) > 1 and self.receiver.fail_first >= 2


def cases() -> st.SearchStrategy[Case]:
    return st.builds(Case, subscriptions(), publishes(), receivers())


# What must arrive: the model


@dataclass(frozen=True)
class Published:
    """One event as published, and what the model says of it."""

    i: int  # its place in publish order, and its data.i
    topic: int
    event: EventDraw
    now: int  # Ingest.publish's `now`: real time less the draw's age
    at: int  # the real time of its publish
    route: RouteDraw | None  # the route that takes it; None: none
    filtered: bool  # a route would take its type, but no filter held

    @property
    def url(self) -> str:
        return f"https://o.test/u{self.event.url}"

    @property
    def key(self) -> str:
        return self.event.key if self.event.key is not None else self.url

    @property
    def expires(self) -> int:
        """When it expires (ms), 0: never (no ttl and BUSBAR_DEFAULT_TTL 0)."""
        if self.route is None or self.route.ttl is None:
            return 0
        return self.now + self.route.ttl * 1000

    def view(self) -> View:
        data: dict[str, Any] = {"i": self.i}
        if self.event.c is not None:
            data["c"] = self.event.c
        if self.event.n is not None:
            data["n"] = self.event.n
        found: View = {"type": self.event.type, "url": self.url, "data": data}
        if self.event.key is not None:
            found["key"] = self.event.key
        return found


def taken_by(topic: TopicDraw, event: EventDraw, view: View) -> tuple[RouteDraw | None, bool]:
    """The route an event takes (the highest priority whose types and filter hold, the
    first listed on a tie) and whether a filter kept it out: some route takes its type,
    yet none does it."""
    ordered = sorted(enumerate(topic.effective()), key=lambda p: (p[1].lane, p[0]))
    typed = [r for _, r in ordered if r.types is None or event.type in r.types]
    for route in typed:
        if route.takes(event, view):
            return route, False
    return None, bool(typed)


@dataclass(frozen=True)
class Verdict:
    must: bool  # must be acknowledged (or dead-lettered) exactly once
    never: bool  # must never arrive


def together(case: Case, x: Published, e: Published) -> bool:
    """Whether two events may share a queue, and so merge: the same partition, or any
    two when a batch may step aside (the aside partition takes keys of every partition)."""
    n = case.subscription.partitions
    return case.aside or partitions.partition_of(x.key, n) == partitions.partition_of(e.key, n)


def verdicts(case: Case, published: list[Published], drained_at: int) -> list[Verdict]:
    """Per event: what the model promises. An event no route takes, or expired when it
    was published, never arrives; one on a coalescing route may be merged away when the
    next event of its url in its partition is on a coalescing route too (lib/batches.lua:
    the merge map is a partition's, by url, and an event that does not coalesce takes
    its url out of it: docs/routes.md); when batches may step aside, which events share a
    partition depends on timing, so any later one may. One its route's transform gives
    nothing for never arrives, and is never dead-lettered. One that expired between its
    publish and the end may or may not arrive. Every other arrives."""
    found = []
    for e in published:
        if e.route is None or (e.expires and e.expires <= e.at) or e.route.drops(e.event):
            found.append(Verdict(must=False, never=True))
            continue
        later = [x.route.coalesce for x in published[e.i + 1 :]
                 if x.route is not None and x.url == e.url and together(case, x, e)]  # fmt: skip
        merged = e.route.coalesce and (any(later) if case.aside else later[:1] == [True])
        alive = not e.expires or e.expires > drained_at
        found.append(Verdict(must=alive and not merged, never=False))
    return found


def places(case: Case, published: list[Published], e: Published) -> set[int]:
    """The places in its queue an arriving event may hold (publish indices): its own,
    or, replaced in place (docs/routes.md, Coalescing), every place the event it
    replaced may hold. It replaces in place only: on a coalescing route, without an
    ordering key of its own (7b6713d), and when the latest earlier event of its url in
    its partition is on a coalescing route of its lane ("the latest queued event of that
    url (itself from a coalescing route)": an event of its url on another route between
    them, coalescing or not, in any lane, takes the url out of lib/batches.lua's map);
    across lanes the older one leaves and the newer queues at the end. Whether the older
    one was still queued, not in flight or sent already, depends on timing: its own place
    is always allowed. When a batch may step aside, which events share a partition
    depends on timing too: then any earlier coalescing event of its url in its lane may
    have been replaced."""
    own = {e.i}
    if e.route is None or not e.route.coalesce or e.event.key is not None:
        return own
    lane = e.route.lane
    same = [x for x in published[: e.i]
            if x.route is not None and x.url == e.url and together(case, x, e)]  # fmt: skip
    if case.aside:
        return own.union(*(places(case, published, x) for x in same
                           if x.route is not None and x.route.coalesce
                           and x.route.lane == lane))  # fmt: skip
    if not same:
        return own
    older = same[-1]
    if older.route is None or not older.route.coalesce or older.route.lane != lane:
        return own
    return own | places(case, published, older)
