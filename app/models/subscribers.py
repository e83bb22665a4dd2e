"""Subscribers: create/replace, list with their queue figures, unsubscribe, delete."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

import redis

from app import codec
from app.errors import Conflict, InvalidInput, NotFound
from app.lua import Scripts
from app.models import partitions
from app.models import subscriber_calls as calls
from app.models.callback_auth import described_auth
from app.models.callback_headers import described
from app.models.client_cert import described as described_cert
from app.models.destination import described as described_destination
from app.models.keys import LANES, Keys
from app.models.route import filter_lists, route_tables, transform_table
from app.models.secrets import new_salt
from app.models.subscription import Subscription
from app.models.tokens import TokenStore, validate_name
from app.models.trash import Trash
from app.redis_client import text
from app.turn import Turn, no_turn

MAIN = "main"
# never copied out of the subscriber hash: the salts secrets are derived from, the job
HIDDEN_FIELDS = frozenset({b"job", b"secret_salt", b"previous_salt"})
# GET /subscriptions reads up to LISTED subscribers of a shard a script call (all the
# calls of a round in one pipeline), walks up to WALKED batches of each (past them, lane
# lists are counted and their events estimated), and a call stops after the subscriber
# with which it passed CALLS Redis calls, the rest asked for in the next round: a call
# is a few ms of Redis whatever the backlogs and concurrencies, and other clients are
# served between calls (subscriber_listing.lua)
LISTED = 100
WALKED = 500
CALLS = 20_000
NAMES_ONE_BY_ONE = 20  # past this many, the names are read as one hash


@dataclass(frozen=True)
class SubscriberInfo:
    token: str
    name: str | None
    fields: dict[str, str]
    routes: dict[str, list[dict[str, Any]]]
    queued: int
    oldest: int | None
    deadletters: int
    in_flight: int  # deliveries
    lanes: tuple[calls.LaneFigures, ...]  # those holding batches, in order

    def describe(self) -> dict[str, Any]:
        """GET /subscriptions' shape: Routemaster's keys first, busbar's extensions after.
        `subscriber` is the token, as in Routemaster, whose clients find their own entry
        by it: only root and the client itself ever see an entry (app/web/subscriptions.py),
        and both know the token already. `name` is for people."""
        f = self.fields
        return {
            "subscriber": self.token,
            "name": self.name,
            "callback": f.get("callback"),
            "uuid": f.get("uuid"),
            "max_events": int(f.get("max_events", 0)),
            "timeout": int(f.get("timeout", 0)),
            "topics": sorted(self.routes),
            "events": {
                "sent": int(f.get("sent", 0)),
                "queued": self.queued,
                "oldest": self.oldest,
                "filtered": int(f.get("filtered", 0)),
                "transformed_out": int(f.get("transformed_out", 0)),
            },
            "max_attempts": int(f.get("max_attempts", 0)) or None,
            "health_points": int(f.get("health_points", 100)),
            "routes": [route for topic in sorted(self.routes) for route in self.routes[topic]],
            "event_ids": f.get("event_ids") == "1",
            "concurrency": int(f.get("concurrency", 1)),
            "draining": int(f["draining"]) if "draining" in f else None,
            "headers": described(f.get("headers")),
            "auth": described_auth(f.get("auth")),
            "client_cert": described_cert(f.get("client_cert")),
            "destination": described_destination(f.get("destination")),
            "transform_version": int(f.get("transform_version", 0)) or None,
        }


class SubscriberStore:
    """Subscriptions as ordered steps over the catalog (routing) and the subscriber's
    shard (settings, routes, queues), each step one script on one slot and safe to
    repeat: whatever a crash interrupts, the same call again finishes it."""

    def __init__(self, client: redis.Redis, keys: Keys, scripts: Scripts) -> None:
        self._redis = client
        self._keys = keys
        self._scripts = scripts

    def headers(self, token: str) -> bytes | None:
        """The stored `headers` field (secrets sealed): what a change may keep."""
        return self._redis.hget(self._keys.subscriber(token), "headers")  # type: ignore[return-value]  # redis-py: bytes on the sync client

    def auth(self, token: str) -> bytes | None:
        """The stored `auth` field (an OAuth2 secret sealed): what a change may keep."""
        return self._redis.hget(self._keys.subscriber(token), "auth")  # type: ignore[return-value]  # redis-py: bytes on the sync client

    def subscribe(
        self,
        token: str,
        sub: Subscription,
        now: int,
        headers: str = "",
        client_cert: str = "",
        auth: str = "",
        destination: str = "",
    ) -> None:
        """Shard first (the subscriber exists), then the catalog (events route to it).
        `headers`: the field's new text (app/services/sealed_headers.py), "" to keep it;
        `client_cert` likewise, its key sealed (app/models/client_cert.py); `auth` too,
        an OAuth2 secret sealed (app/models/callback_auth.py); `destination`, a
        broker's with its secrets sealed (app/models/destination.py), "" for none."""
        k = self._keys
        name = self._redis.hget(k.tokens, token)
        fields = calls.ShardFields(
            callback=sub.callback,
            uuid=sub.uuid or secrets.token_hex(16),
            uuid_given=bool(sub.uuid),
            timeout_ms=sub.timeout,
            max_events=sub.max_events,
            max_attempts=sub.max_attempts,
            job=codec.pack_job("batch", [token]),
            name=text(name) if name else "(deleted client)",
            event_ids=sub.event_ids,
            salt=new_salt(),
            headers=headers,
            auth=auth or ("" if sub.auth is None else sub.auth.stored()),
            client_cert=client_cert,
            transforms=transform_table(sub.routes),
            destination=destination,
        )
        tables = route_tables(sub.routes)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for r in sub.routes:  # one pass: per topic over every route was quadratic
            by_topic.setdefault(r.topic, []).append(r.describe())
        routes = [(topic, json.dumps(by_topic[topic])) for topic in sub.topics]
        lists = filter_lists(sub.routes)
        routing = [
            (topic, codec.pack_route_table(tables.get(topic, {})), lists.get(topic, ""))
            for topic in sub.topics
        ]
        c = sub.concurrency
        call = calls.subscribe(k, token, fields, now, c, partitions.jobs(token, c), routes)
        self._scripts.run(call)
        self._scripts.run(calls.subscribe_route(k, token, routing))

    def unsubscribe_topic(self, token: str, topic: str) -> None:
        """Catalog first (nothing more is routed), then the shard (its listing)."""
        routed = self._scripts.run(calls.unsubscribe_topic(self._keys, token, topic))
        listed = self._redis.hdel(self._keys.routes(token), topic)
        if not routed and not listed:
            raise NotFound(f"not subscribed to {topic}")

    def delete(self, token: str, *, forget_token: bool = False, login: str = "") -> int:
        """Returns the number of queued events dropped; NotFound when not subscribed.
        Catalog first (nothing more is routed), then the shard, then its trash.
        `forget_token`: the client goes too; but with `login`, one of its tokens, only
        that token goes while the client has another (nothing is dropped then)."""
        k = self._keys
        routed = self._scripts.run(calls.unroute(k, token, forget_token, login))
        if routed is calls.Unrouted.TOKEN_ONLY:
            return 0
        deleted = self._scripts.run(calls.delete(k, token, LANES[-1]))
        bin_ = Trash(self._redis, k, self._scripts)
        for member in deleted.trash:
            bin_.purge(k.home(token), member)
        if not routed and not deleted.existed and not forget_token:
            raise NotFound("no subscription for this client")
        return deleted.dropped

    def tokens(self) -> list[str]:
        return sorted(text(t) for t in self._redis.hkeys(self._keys.subscribers))

    def is_subscriber(self, token: str) -> bool:
        return bool(self._redis.hexists(self._keys.subscribers, token))

    def describe(
        self,
        tokens: list[str],
        names: dict[str, str] | None = None,
        budget: int = CALLS,
        turn: Turn = no_turn,
    ) -> list[SubscriberInfo]:
        """The subscribers of `tokens` that exist, in that order: a subscriber_listing
        call for every LISTED of a shard, the calls pipelined (Scripts.run_many), and
        again for those a call's budget left.
        `names`: the clients' names when the caller has read them (names()); `budget`:
        the Redis calls a script call makes before it stops after a subscriber; `turn`:
        called after each subscriber is read back (app/turn.py)."""
        k = self._keys
        by_shard: dict[int, list[str]] = {}
        for token in tokens:
            by_shard.setdefault(k.shard_of(token), []).append(token)
        pending = [
            (n, group[i : i + LISTED])
            for n, group in by_shard.items()
            for i in range(0, len(group), LISTED)
        ]
        found: dict[str, calls.Listed] = {}
        while pending:
            replies = self._scripts.run_many(
                [calls.listing(k.shard(n), chunk, WALKED, budget) for n, chunk in pending]
            )
            left = []
            for (n, chunk), reply in zip(pending, replies, strict=True):
                found.update((t, one) for t, one in zip(chunk, reply, strict=False) if one)
                if len(reply) < len(chunk):  # its budget ran out: the rest, next round
                    left.append((n, chunk[max(1, len(reply)) :]))
            pending = left
        if names is None:
            names = self.names([t for t in tokens if t in found])
        described = []
        for token in tokens:
            if token not in found:
                continue
            one = found[token]
            described.append(
                SubscriberInfo(
                    token=token,
                    name=names.get(token),
                    fields={
                        a.decode(): b.decode()
                        for a, b in one.fields.items()
                        if a not in HIDDEN_FIELDS
                    },
                    routes={t.decode(): json.loads(v) for t, v in one.routes.items()},
                    queued=one.queued,
                    oldest=one.oldest,
                    deadletters=one.deadletters,
                    in_flight=one.in_flight,
                    lanes=one.lanes,
                )
            )
            turn()  # a subscriber of 1,000 routes is some 6 ms of it
        return described

    def names(self, tokens: list[str]) -> dict[str, str]:
        """Each client's name, where it has one: the whole hash for many (one reply),
        HMGET for a few."""
        if len(tokens) > NAMES_ONE_BY_ONE:
            every = self._redis.hgetall(self._keys.tokens)
            named = {text(t): text(n) for t, n in every.items()}
            return {t: named[t] for t in tokens if named.get(t)}
        if not tokens:
            return {}
        got = self._redis.hmget(self._keys.tokens, tokens)
        return {t: text(n) for t, n in zip(tokens, got, strict=True) if n}


def subscriber_named(tokens: TokenStore, subscribers: SubscriberStore, name: str) -> str:
    """The token of the one subscribing client with that name. A name no client can
    have (control characters, too long) names nobody: NotFound, as any other unknown
    name, because the caller asks for a client, it does not propose a name."""
    try:
        validate_name(name)
    except InvalidInput as exc:
        raise NotFound(f"no subscriber has that name ({exc.message})") from None
    found = [t for t in tokens.tokens_named(name) if subscribers.is_subscriber(t)]
    if not found:
        raise NotFound(f"no subscriber named {name}")
    if len(found) > 1:
        raise Conflict(
            f"{len(found)} subscribers are named {name}; use their own tokens, or rename all "
            "but one (busbar clients shared, busbar clients rename)"
        )
    return found[0]
