"""A random valid subscription, on the engine the workers run (issue 53, item 1's
hypothesis strategy). Each example subscribes a body drawn by
spec/app/delivery/subscriptions_strategy.py (any combination of max, timeout,
concurrency 1-8, max_attempts, event_ids, uuid, plain and write-only headers, auth
basic, jwt or oauth2, a client certificate, topic names and route objects with
priority, ttl, types, coalesce, content filters and transforms) through the web (in process: the
body parsed and its secrets sealed as POST /subscription does), publishes drawn events
to it (some long ago, some to a topic it lacks), and lets the real delivery engine
(app/delivery/engine.py's Engine, its slots, steps and Lua on the test's Redis, with the
worker's Scheduler) deliver them to a real local receiver (http, or https demanding the
subscription's client certificate; an in-process OAuth2 token endpoint). The receiver
checks every request's credentials (401 when one is missing or wrong) and fails the
first attempts of each batch as drawn. Then:

- every event that must arrive (docs/semantics.md, docs/routes.md, docs/filters.md: not
  kept out by a route's types or filter, not expired, not merged away by a newer event of
  its url on a coalescing route, not given nothing by its route's transform) is
  acknowledged exactly once, with the data its route's transform makes, or with
  `max_attempts` reached is a dead letter once instead; none that must not arrive is
  ever sent, nor dead-lettered;
- each ordering key's acknowledged events come in publish order within their lane (an
  event coalesced in place holding the place of the one it replaced); at `concurrency`
  1, each lane's;
- never two requests holding one key in flight at once, never more in flight than the
  concurrency; a batch holds at most `max` events, of one lane and one partition (or
  the aside partition, where a key that failed twice steps: docs/semantics.md);
- `event_ids`: each event carries one id, the same on every attempt;
- every request carried the subscription's own headers, its Basic uuid or its valid
  JWT or OAuth2 token, and its client certificate;
- the test call (POST /subscription/test: app/delivery/trial.attempt with the fields
  as the web reads them) carried the same own headers and credentials, and the
  receiver's answer to it was of the class of its answer to a delivery's first attempt;
- `events.filtered` counts the events a filter kept out.

Two defects of coalescing it met, where one lane holds a coalescing route and one that
does not (a merge overtaking the url's event that does not coalesce; a rewrite pointing
the url's map entry at that event), are the regression tests at the end. `make test` draws 48
examples from a fixed seed, `make check` a third; a longer hunt, with a random seed:
BUSBAR_PROPERTY_EXAMPLES=1500 BUSBAR_PROPERTY_RANDOM=1 (docs/tests.md).
"""

from __future__ import annotations

import base64
import itertools
import os
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import jwt
import pytest
import redis
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, note, settings

from app.clock import now_ms
from app.delivery.engine import Engine
from app.models import partitions
from app.models.event import Event
from app.models.keys import Keys, keys_for
from app.web import create_app
from app.web.context import EXTENSION, WebContext
from config.parsers import allowlist
from config.settings import DEV_CALLBACK_ALLOW, Settings
from spec.app.delivery.subscriptions_strategy import (
    CLOSE,
    MAX_TOPICS,
    Auth,
    Case,
    EventDraw,
    PublishDraw,
    Published,
    ReceiverDraw,
    RouteDraw,
    SubscriptionDraw,
    TopicDraw,
    cases,
    places,
    taken_by,
    verdicts,
)
from spec.budget import examples
from spec.conftest import ROOT_KEY
from spec.integration.oauth_server import TokenServer, token_server
from spec.integration.subscriber import Received, Subscriber, serving
from spec.integration.tls import InternalCA, client_certificate
from workers.scheduler import schedulers

EXAMPLES = int(os.environ.get("BUSBAR_PROPERTY_EXAMPLES", "0")) or examples(48)
RANDOM = bool(os.environ.get("BUSBAR_PROPERTY_RANDOM"))  # a random seed: a longer hunt
CN = "billing"  # the client certificate's subject
STALLED_S = 10.0  # a queue that does not move this long is stuck (drained())


def basic(token: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{token}:x".encode()).decode()}


ROOT = basic(ROOT_KEY)


@dataclass
class Seen:
    """One request the receiver took."""

    events: list[dict[str, Any]]
    headers: dict[str, str]  # names in lower case
    webhook_id: str
    attempt: int  # of this webhook-id, from 1
    status: int  # what the receiver answered (CLOSE: it hung up)
    trial: bool
    problems: list[str]
    client_cn: str
    started: float


@dataclass
class Expected:
    """The credentials every request of one subscription must carry."""

    headers: dict[str, str]  # lower-case name -> value
    auth: str  # basic, jwt, oauth2
    uuid: str = ""  # basic: the user (read from GET /subscriptions once subscribed)
    audience: str = ""  # jwt
    client: str = ""  # jwt's `sub`: the client's name; oauth2: its client id
    cn: str = ""  # the client certificate's CN, "" for none


@dataclass
class Watch:
    """One example's receiver: checks credentials, answers as drawn, and watches keys."""

    expected: Expected
    draw: ReceiverDraw
    tokens: TokenServer
    issuer: str
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    attempts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    holding: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    overlaps: list[str] = field(default_factory=list)
    in_flight: int = 0
    most: int = 0

    def problems(self, headers: dict[str, str], cn: str) -> list[str]:
        e, found = self.expected, []
        for name, value in e.headers.items():
            if headers.get(name) != value:
                found.append(f"header {name}: {headers.get(name)!r}")
        given = headers.get("authorization", "")
        if e.auth == "basic":
            user = ""
            if given.startswith("Basic "):
                user = base64.b64decode(given[6:]).decode().split(":")[0]
            if user != e.uuid:
                found.append(f"basic user {user!r}, not {e.uuid!r}")
        elif e.auth == "jwt":
            try:
                claims = jwt.decode(given.removeprefix("Bearer "),
                                    options={"verify_signature": False})  # fmt: skip
            except jwt.PyJWTError as exc:
                found.append(f"no JWT: {exc}")
            else:
                want = {"aud": e.audience, "iss": self.issuer, "sub": e.client}
                if {k: claims.get(k) for k in want} != want:
                    found.append(f"JWT claims {claims}")
        elif self.tokens.check(given) != e.client:
            found.append(f"OAuth2 token not valid: {given[:20]!r}")
        if cn != e.cn:
            found.append(f"client certificate {cn!r}")
        return found

    def __call__(self, record: Received) -> tuple[int, float]:
        headers = {k.lower(): v for k, v in record.headers.items()}
        problems = self.problems(headers, record.client_cn)
        wid = headers.get("webhook-id", "")
        keys = {str(e.get("key", e["url"])) for e in record.events}
        with self.lock:
            self.attempts[wid] += 1
            attempt = self.attempts[wid]
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.overlaps += [k for k in keys if self.holding[k]]
            for k in keys:
                self.holding[k] += 1
        d = self.draw
        status = 401 if problems else d.fail_status if attempt <= d.fail_first else d.ok_status
        time.sleep(d.delay_ms / 1000)
        with self.lock:
            self.in_flight -= 1
            for k in keys:
                self.holding[k] -= 1
            self.seen.append(Seen(record.events, headers, wid, attempt, status,
                                  headers.get("busbar-test") == "1", problems,
                                  record.client_cn, record.started))  # fmt: skip
        return status, 0.0


@dataclass
class Rig:
    """The bus of every example: the web in process, one engine and the scheduler in
    threads, two receivers (http; https with mutual TLS) and a token endpoint."""

    settings: Settings
    client: redis.Redis
    keys: Keys
    web: FlaskClient
    services: WebContext
    plain: str  # the receivers' urls
    mtls: str
    tokens: TokenServer
    cert: tuple[str, str]  # the client certificate's PEMs
    watches: dict[str, Watch]
    count: itertools.count[int] = field(default_factory=itertools.count)

    def call(self, method: str, path: str, auth: dict[str, str], body: Any = None) -> Any:
        answer = self.web.open(path, method=method, headers=auth, json=body)
        assert answer.status_code < 300, (method, path, answer.status_code, answer.get_json())
        return answer.get_json() if answer.data else None

    def queued(self, token: str) -> int:
        return int(self.client.hget(self.keys.home(token).event_gauge, token) or 0)


def dispatch(watches: dict[str, Watch]) -> Any:
    def respond(record: Received) -> tuple[int, float]:
        watch = watches.get(record.path)
        return (404, 0.0) if watch is None else watch(record)

    return respond


@contextmanager
def rig(redis_url: str, client: redis.Redis, ca: InternalCA) -> Iterator[Rig]:
    cert = client_certificate(ca, CN)
    watches: dict[str, Watch] = {}
    base = Settings(
        redis_url=redis_url, root_key=ROOT_KEY, allow_http=True,
        callback_allow=allowlist(DEV_CALLBACK_ALLOW), ca_bundle=str(ca.ca),
        delivery_concurrency=16, retry_lone_ms=5, retry_first_ms=10, max_backoff_ms=40,
        circuit_probe_ms=100, timeout=10, failing_share=100,
    )  # fmt: skip
    app = create_app(base, client)
    services: WebContext = app.extensions[EXTENSION]
    stop = threading.Event()
    engine = Engine(base, "prop.1.x")
    loops = [engine.run, *(s.run for s in schedulers(base, "prop.1.x"))]
    threads = [threading.Thread(target=loop, args=(stop,), daemon=True) for loop in loops]
    with (
        serving(Subscriber(responder=dispatch(watches))) as plain,
        serving(Subscriber(responder=dispatch(watches)), tls=(ca.cert, ca.key),
                client_ca=ca.ca) as mtls,
        token_server() as tokens,
    ):  # fmt: skip
        for thread in threads:
            thread.start()
        try:
            web = app.test_client()
            found = Rig(base, client, keys_for(base), web, services, plain.url, mtls.url,
                        tokens, cert, watches)  # fmt: skip
            found.call("POST", "/api_tokens", ROOT, {"name": "pub", "token": "pub"})
            yield found
        finally:
            stop.set()
            for thread in threads:
                thread.join(15)


@dataclass
class Names:
    """What a drawn Case becomes in one run."""

    token: str
    name: str
    topics: list[str]  # the subscription's, then one it lacks
    callback: str
    path: str
    client_id: str


def body_of(r: Rig, sub: SubscriptionDraw, names: Names) -> dict[str, Any]:
    topics: list[Any] = []
    for topic, drawn in zip(names.topics, sub.topics, strict=False):
        if drawn.name_too:
            topics.append(topic)
        topics += [route.body(topic) for route in drawn.objects]
    found: dict[str, Any] = {"topics": topics, "callback": names.callback}
    for name, value in (("max", sub.max), ("timeout", sub.timeout),
                        ("concurrency", sub.concurrency), ("max_attempts", sub.max_attempts),
                        ("event_ids", sub.event_ids), ("uuid", sub.uuid)):  # fmt: skip
        if value is not None:
            found[name] = value
    if sub.headers is not None:
        found["headers"] = {
            h.name: {"value": h.value, "secret": True} if h.secret else h.value for h in sub.headers
        }
    auth = sub.auth
    if auth.type in ("basic", "jwt"):
        found["auth"] = {"type": auth.type}
        if auth.audience is not None:
            found["auth"]["audience"] = auth.audience
    elif auth.type == "oauth2":
        found["auth"] = {"type": "oauth2", "token_url": r.tokens.url,
                         "client_id": names.client_id, "client_secret": auth.secret}  # fmt: skip
        if auth.scope is not None:
            found["auth"]["scope"] = auth.scope
    if sub.client_cert:
        found["client_cert"] = {"cert": r.cert[0], "key": r.cert[1]}
    return found


@dataclass
class Run:
    """What one example did and saw."""

    case: Case
    names: Names
    published: list[Published]
    drained_at: int
    watch: Watch
    trial: dict[str, Any]
    dead: list[dict[str, Any]]
    listing: dict[str, Any]
    jwks: dict[str, Any]


def ran(r: Rig, case: Case) -> Run:
    n = next(r.count)
    sub = case.subscription
    token, path = f"tok-prop-{n}", f"/events/{n}"
    letters = "".join("abcdefghij"[int(c)] for c in str(n))  # topic names are [a-z_]
    names = Names(
        token, f"prop{n}", [f"p_{letters}_{'abc'[j]}" for j in range(len(sub.topics) + 1)],
        (r.mtls if sub.client_cert else r.plain) + f"/{n}", path, f"client{n}",
    )  # fmt: skip
    r.call("POST", "/api_tokens", ROOT, {"name": names.name, "token": token})
    if sub.auth.type == "oauth2":
        r.tokens.add(names.client_id, sub.auth.secret)
    own = basic(token)
    r.call("POST", "/subscription", own, body_of(r, sub, names))
    kind = sub.auth.type or "basic"
    expected = Expected(
        {h.name.lower(): h.value for h in sub.headers or ()}, kind,
        audience=sub.auth.audience or names.callback,
        client=names.client_id if kind == "oauth2" else names.name,
        cn=CN if sub.client_cert else "",
    )  # fmt: skip
    expected.uuid = r.call("GET", "/subscriptions", own)[0]["uuid"]
    watch = Watch(expected, case.receiver, r.tokens, r.settings.public_url)
    r.watches[path] = watch
    try:
        published = publish(r, case, names)
        drained(r, token, watch)
        drained_at = now_ms()
        trial = r.call("POST", "/subscription/test", own)
        dead = r.call("GET", "/subscriber/deadletters", own)
        listing = r.call("GET", "/subscriptions", own)[0]
        jwks = r.call("GET", "/.well-known/jwks.json", {})
    finally:
        r.web.delete("/subscriber", headers=own)
        r.watches.pop(path, None)
    return Run(case, names, published, drained_at, watch, trial, dead, listing, jwks)


def drained(r: Rig, token: str, watch: Watch) -> None:
    """Until nothing is queued (acknowledged, dead or dropped: the gauge counts a batch
    in flight until its ack) and no request is in flight. Failing batches are retried
    within BACKOFF (40 ms) and an open circuit probed every 100 ms here, so a queue that
    does not move for STALLED_S is stuck: it fails then, not at a long deadline."""
    last, moved = (-1, -1), time.monotonic()
    while r.queued(token) or watch.in_flight:
        now = (r.queued(token), len(watch.seen))
        if now != last:
            last, moved = now, time.monotonic()
        elif time.monotonic() - moved > STALLED_S:
            answers = Counter(s.status for s in watch.seen)
            raise AssertionError(
                f"{now[0]} event(s) still queued, nothing moved for {STALLED_S:.0f} s; "
                f"the receiver's answers so far (status: count): {dict(answers)}"
            )
        time.sleep(0.005)


def publish(r: Rig, case: Case, names: Names) -> list[Published]:
    sub, published = case.subscription, list[Published]()
    for p in case.publishes:
        now, at = now_ms() - p.age_ms, now_ms()
        topic = len(sub.topics) if p.topic == MAX_TOPICS else p.topic % len(sub.topics)
        events = []
        for drawn in p.events:
            made = Published(len(published), topic, drawn, now, at, None, False)
            view = made.view()
            if topic < len(sub.topics):
                route, filtered = taken_by(sub.topics[topic], drawn, view)
                made = replace(made, route=route, filtered=filtered)
            published.append(made)
            events.append(Event(drawn.type, made.url, now, view["data"], key=drawn.key))
        r.services.ingest.publish(names.topics[topic], "pub", events, now)
        if p.pause:
            time.sleep(0.02)
    return published


def status_class(status: int | None) -> int | None:
    """2 for 2xx and so on; None for no answer (CLOSE, or the test call's null)."""
    return None if not status else status // 100


def check(run: Run) -> None:
    for s in run.watch.seen:  # credentials on every request, the test call's included
        assert s.problems == [], (s.problems, s.headers)
    check_arrivals(run)
    check_order(run)
    check_batches(run)
    check_trial(run)
    filtered = sum(1 for e in run.published if e.filtered)
    assert run.listing["events"]["filtered"] == filtered, (run.listing["events"], filtered)


def deliveries(run: Run) -> list[Seen]:
    return [s for s in run.watch.seen if not s.trial]


def check_arrivals(run: Run) -> None:
    """Each event that must arrive acknowledged once, or dead once; none that must
    not, ever sent; dead letters exactly when the drawn failures outlast max_attempts
    (with CLOSE, a reused connection's request is sent again once within one attempt:
    app/delivery/callback.py, so the receiver's count is no attempt count there; nor
    when a batch may step aside, moved with its keys' later events, or a failed batch
    change by coalescing: a new webhook-id, the attempts counted on)."""
    sub, d = run.case.subscription, run.case.receiver
    sent, acked, dead = Counter[int](), Counter[int](), Counter[int]()
    for s in deliveries(run):
        for got in s.events:
            sent[got["data"]["i"]] += 1
            if 200 <= s.status < 300:
                acked[got["data"]["i"]] += 1
    for letter in run.dead:
        dead[letter["data"]["i"]] += 1
    for e, verdict in zip(run.published, verdicts(run.case, run.published, run.drained_at),
                          strict=True):  # fmt: skip
        if verdict.never:
            assert not sent[e.i], f"event {e.i} sent {sent[e.i]} time(s), never due: {e}"
            assert not dead[e.i], f"event {e.i} dead-lettered, never due: {e}"
            continue
        assert acked[e.i] + dead[e.i] <= 1, (e, acked[e.i], dead[e.i])
        if verdict.must:
            assert acked[e.i] + dead[e.i] == 1, f"event {e.i} never acknowledged nor dead: {e}"
    coalescing = any(r.coalesce for topic in sub.topics for r in topic.objects)
    attempts = sub.max_attempts
    counted = d.fail_status != CLOSE and not run.case.aside and not coalescing
    if not d.fail_first or attempts is None or (counted and attempts > d.fail_first):
        assert not dead, f"dead letters {dict(dead)}, yet every batch succeeds in time"
    if counted and attempts is not None and d.fail_first >= attempts:
        assert not acked, f"acknowledged {dict(acked)}, yet every batch fails {attempts}x"
        assert {letter["attempts"] for letter in run.dead} <= {attempts}, run.dead


def check_order(run: Run) -> None:
    """Each key's acknowledged events (each lane's at concurrency 1) in publish order,
    an event coalesced in place holding the place of the one it replaced; never two
    requests holding one key at once, never more than the concurrency."""
    sub, watch = run.case.subscription, run.watch
    by_i = {e.i: e for e in run.published}
    concurrency = sub.concurrency or 1
    last: dict[tuple[int, str], int] = {}
    for s in sorted(deliveries(run), key=lambda s: s.started):
        if not 200 <= s.status < 300:
            continue
        for got in s.events:
            e = by_i[got["data"]["i"]]
            assert e.route is not None, e
            group = (e.route.lane, e.key if concurrency > 1 else "")
            after = last.get(group, -1)
            ranks = sorted(x for x in places(run.case, run.published, e) if x > after)
            assert ranks, f"event {e.i} came after place {after} of {group}: out of order"
            last[group] = ranks[0]
    assert watch.overlaps == [], f"keys in two requests at once: {watch.overlaps}"
    assert watch.most <= concurrency, f"{watch.most} requests at once, concurrency {concurrency}"


def check_batches(run: Run) -> None:
    """A batch: 1 to `max` events as published, of one lane and one partition (or the
    aside one); with event_ids each event's one id on every attempt, distinct from the
    others'."""
    sub = run.case.subscription
    by_i = {e.i: e for e in run.published}
    ids: dict[int, set[str]] = defaultdict(set)
    for s in deliveries(run):
        events = [by_i[got["data"]["i"]] for got in s.events]
        assert 1 <= len(events) <= (sub.max or 100), len(events)
        assert len({e.route.lane for e in events if e.route}) == 1, [e.route for e in events]
        homes = {partitions.partition_of(e.key, sub.partitions) for e in events}
        assert len(homes) == 1 or run.case.aside, events
        for got, e in zip(s.events, events, strict=True):
            assert (got["type"], got["url"], got.get("key"), got["topic"]) == (
                e.event.type, e.url, e.event.key, run.names.topics[e.topic]
            ), (got, e)  # fmt: skip
            assert e.route is not None and got["data"] == e.route.shaped(e.view()["data"]), got
            assert ("id" in got) == bool(sub.event_ids), got
            if "id" in got:
                ids[e.i].add(got["id"])
    assert all(len(v) == 1 for v in ids.values()), ids
    assert len({min(v) for v in ids.values()}) == len(ids), ids


def check_trial(run: Run) -> None:
    """The test call asked once with `[]`, told the receiver's answer, and met it as a
    delivery does: the same own headers, Basic user, certificate; its answer of the class
    of a delivery's first attempt's. JWTs, the test call's too, verify against the
    bus's keys (GET /.well-known/jwks.json)."""
    watch = run.watch
    trials = [s for s in watch.seen if s.trial]
    assert len(trials) == 1, f"the test call reached the receiver {len(trials)} time(s)"
    tried = trials[0]
    assert tried.events == [], tried.events
    assert status_class(run.trial["status"]) == status_class(tried.status), (run.trial, tried)
    firsts = {status_class(s.status) for s in deliveries(run) if s.attempt == 1}
    assert firsts <= {status_class(tried.status)}, (firsts, run.trial)
    own = sorted(watch.expected.headers)
    for s in deliveries(run):
        assert [s.headers.get(k) for k in own] == [tried.headers.get(k) for k in own]
        assert s.client_cn == tried.client_cn, (s.client_cn, tried.client_cn)
        if watch.expected.auth == "basic":
            assert s.headers.get("authorization") == tried.headers.get("authorization")
    if watch.expected.auth == "jwt":
        keyset = jwt.PyJWKSet.from_dict(run.jwks)
        for s in watch.seen:
            token = s.headers["authorization"].removeprefix("Bearer ")
            key = keyset[jwt.get_unverified_header(token)["kid"]]
            jwt.decode(token, key.key, algorithms=["ES256"], audience=watch.expected.audience,
                       issuer=watch.issuer)  # fmt: skip


@pytest.mark.timeout(900)  # shrinking a failure runs many examples
def test_a_random_valid_subscription_gets_what_it_was_promised(bus: Rig):
    @settings(
        max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )  # fmt: skip
    @given(case=cases())
    def promised(case: Case) -> None:
        note(repr(case))
        check(ran(bus, case))

    promised()


def plain(*routes: RouteDraw, concurrency: int | None = None) -> SubscriptionDraw:
    """A subscription of one topic with these routes, nothing else given."""
    return SubscriptionDraw((TopicDraw(routes, False),), None, None, concurrency, None, None,
                            None, None, Auth(""), False)  # fmt: skip


def one_publish(*events: tuple[str, int, str | None]) -> PublishDraw:
    """One publish of these (type, url, key) to the subscription's topic."""
    return PublishDraw(0, 0, tuple(EventDraw(t, u, k, None, None) for t, u, k in events), False)


# updates coalesce, deletes do not, both on lane 10 (no priority)
UPDATES_COALESCE = (RouteDraw(None, None, ("update",), True, None),
                    RouteDraw(None, None, ("delete",), False, None))  # fmt: skip


@pytest.mark.parametrize("concurrency", [None, 4])
def test_a_coalesced_state_never_overtakes_its_urls_event_that_does_not_coalesce(
    bus: Rig, concurrency: int | None
):
    """update, delete, update of one url, published at once: the second update took the
    first's place, ahead of the delete, and the receiver saw update (2), delete (1), the
    url deleted for good though its last state is an update. docs/routes.md merges "with
    the latest queued event of that url (itself from a coalescing route)", here the
    delete, so nothing merges; docs/semantics.md keeps a key's events in publish order
    within a lane."""
    case = Case(
        plain(*UPDATES_COALESCE, concurrency=concurrency),
        (one_publish(("update", 0, None), ("delete", 0, None), ("update", 0, None)),),
        ReceiverDraw(0, 500, 200, 0),
    )
    run = ran(bus, case)
    arrived = [got["data"]["i"] for s in deliveries(run) for got in s.events]
    assert arrived.index(1) < arrived.index(2), arrived  # the delete, then the last update
    check(run)


@pytest.mark.parametrize("leaves", ["under a key of its own", "for another lane"])
def test_an_event_that_does_not_coalesce_is_never_merged_away(bus: Rig, leaves: str):
    """update u0, delete u0, update u1; then u1's state leaves the batch, which is
    rewritten (a newer state of u1 under a key of its own, 7b6713d, or on a coalescing
    route of another lane: creates, priority 0); then u0 updated again. The rewrite
    pointed u0's map entry at the delete, and the last update replaced it: the delete
    never arrived. "Events on non-coalescing routes are never merged" (docs/routes.md)."""
    keyed = leaves == "under a key of its own"
    case = Case(
        plain(*UPDATES_COALESCE, RouteDraw(0, None, ("create",), True, None)),
        (
            one_publish(
                ("update", 0, None),
                ("delete", 0, None),
                ("update", 1, None),
                ("update", 1, "k1") if keyed else ("create", 1, None),
                ("update", 0, None),
            ),
        ),
        ReceiverDraw(0, 500, 200, 0),
    )
    run = ran(bus, case)
    arrived = [got["data"]["i"] for s in deliveries(run) for got in s.events]
    assert 1 in arrived, arrived  # the delete
    check(run)


def test_the_strategy_draws_every_kind_of_field():
    """The strategy's reach, so a change that narrows it shows: among a hundred draws,
    every field and every auth, filters, coalescing, ttls, aged events and failures."""
    seen: set[str] = set()

    @settings(max_examples=100, derandomize=True, database=None)
    @given(case=cases())
    def draw(case: Case) -> None:
        sub = case.subscription
        seen.update(k for k in ("max", "timeout", "concurrency", "max_attempts", "event_ids",
                                "uuid", "headers") if getattr(sub, k) is not None)  # fmt: skip
        seen.add(f"auth:{sub.auth.type}")
        seen.update({"client_cert"} if sub.client_cert else set())
        seen.update({"secret"} if any(h.secret for h in sub.headers or ()) else set())
        for topic in sub.topics:
            for route in topic.objects:
                seen.update(k for k in ("priority", "ttl", "types", "filter")
                            if getattr(route, k) is not None)  # fmt: skip
                seen.update({"coalesce"} if route.coalesce else set())
        seen.update({f"fail:{case.receiver.fail_status}"} if case.receiver.fail_first else set())
        seen.update({"aged"} if any(p.age_ms for p in case.publishes) else set())

    draw()
    wanted = {"max", "timeout", "concurrency", "max_attempts", "event_ids", "uuid", "headers",
              "secret", "auth:", "auth:basic", "auth:jwt", "auth:oauth2", "client_cert",
              "priority", "ttl", "types", "filter", "coalesce", "fail:500", "fail:503",
              f"fail:{CLOSE}", "aged"}  # fmt: skip
    assert wanted <= seen, wanted - seen
