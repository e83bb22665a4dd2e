"""The scripts that change subscriptions, topics and dead letters: their KEYS and ARGV
and their replies, each built in one place (app/models/subscribers.py, pausing.py,
trash.py, secrets.py, topics.py and deadletters.py call them).
spec/app/models/test_script_calls.py checks each against its script's header."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, NamedTuple

from app.lua.call import Call, as_bool, as_int
from app.models.keys import MAIN, Keys, Place
from app.redis_client import text


@dataclass(frozen=True)
class ShardFields:
    """What subscribe.lua writes in the subscriber hash."""

    callback: str
    uuid: str
    uuid_given: bool  # False: a stored uuid is kept
    timeout_ms: int
    max_events: int
    max_attempts: int
    job: bytes  # the subscriber's delivery job
    name: str  # the client's (logs name clients, never by token)
    event_ids: bool
    salt: str  # of the signing secret, kept if one exists
    headers: str = ""  # the `headers` field's new text, "[]" for none, "" to keep it
    auth: str = ""  # the `auth` field's new text, "basic" for none, "" to keep it
    client_cert: str = ""  # the `client_cert` field's new text, "-" for none, "" to keep it
    transforms: str = ""  # the routes' transforms (route.transform_table), "" for none
    destination: str = ""  # a broker's, secrets sealed (app/models/destination.py); "" none


def subscribe(
    keys: Keys,
    token: str,
    f: ShardFields,
    now: int,
    concurrency: int,
    jobs: list[bytes],
    routes: list[tuple[str, str]],
) -> Call[None]:
    """The shard step. `jobs`: the partitions' jobs when concurrency > 1; `routes`:
    (topic, JSON route list) for each topic. A change of concurrency is always taken
    (subscribe.lua folds a layout that waited for a drain into the newest)."""
    args: list[object] = [
        f.callback, f.uuid, "1" if f.uuid_given else "0", f.timeout_ms, f.max_events,
        f.max_attempts, f.job, now, f.name, "1" if f.event_ids else "0", f.salt,
        keys.home(token).base, token, concurrency, f.headers, f.auth,
        f.client_cert, len(jobs), *jobs, f.transforms, f.destination,
    ]  # fmt: skip
    args += [value for pair in routes for value in pair]
    return Call("subscribe", [keys.subscriber(token), keys.routes(token)], args, _none)


def _none(_: Any) -> None:
    return None


def subscribe_route(keys: Keys, token: str, tables: list[tuple[str, bytes, str]]) -> Call[None]:
    """The catalog step: `tables`, (topic, route table packed, JSON list of its filters
    or '') for each topic."""
    args: list[object] = [keys.catalog.base, token, keys.shard_of(token)]
    args += [value for triple in tables for value in triple]
    return Call("subscribe_route", [keys.subscribers, keys.topics], args, _none)


def unsubscribe_topic(keys: Keys, token: str, topic: str) -> Call[bool]:
    """Reads whether the topic was routed to the subscriber."""
    return Call(
        "unsubscribe_topic",
        [keys.subscribers, keys.topic_subscribers(topic)],
        [token, topic, keys.catalog.base],
        as_bool,
    )


class Unrouted(enum.IntEnum):
    """subscriber_unroute's answer."""

    ABSENT = 0  # the subscriber was not in the catalog
    ROUTED = 1  # it was; nothing is routed to it now
    TOKEN_ONLY = 2  # the token deleted was not its client's last: only it went


def unroute(keys: Keys, token: str, forget_token: bool, login: str = "") -> Call[Unrouted]:
    """subscriber_unroute, the catalog step of a delete. With `forget_token`, `login` is
    the token being deleted, of which the client keyed `token` may have others; "" forgets
    the client with every token it has."""
    return Call(
        "subscriber_unroute",
        [keys.tokens, keys.subscribers, keys.aliases, keys.names],
        [keys.catalog.base, token, "1" if forget_token else "0", login],
        lambda reply: Unrouted(int(reply)),
    )


class Deleted(NamedTuple):
    existed: bool
    dropped: int  # events
    trash: list[str]  # members of the shard's trash set left to purge


def _deleted(reply: Any) -> Deleted:
    existed, dropped, *trash = reply
    return Deleted(bool(existed), int(dropped), [text(t) for t in trash])


def delete(keys: Keys, token: str, lowest_lane: int) -> Call[Deleted]:
    """subscriber_delete, the shard step of a delete."""
    home = keys.home(token)
    return Call(
        "subscriber_delete",
        [
            keys.subscriber(token), keys.routes(token), home.event_gauge, home.batch_gauge,
            home.counters, *home.job_states(MAIN), home.trash,
        ],
        [home.base, token, lowest_lane],
        _deleted,
    )  # fmt: skip


def purge(keys: Keys, shard: Place, member: str, most: int) -> Call[int]:
    """subscriber_purge of one trash member (`<token>/<n>/<lane>`) of the shard: reads
    the batches still in its trash lane list."""
    token, n, lane = member.rsplit("/", 2)
    return Call(
        "subscriber_purge",
        [shard.trash, keys.trash_lane(token, n, lane), shard.batch_index(lane)],
        [shard.base, member, token, most],
        as_int,
    )


class Paused(NamedTuple):
    at: str  # '' once resumed
    by: str


def _paused(reply: Any) -> Paused | None:
    return Paused(*(text(v or "") for v in reply)) if reply else None


def pause(
    keys: Keys, token: str, now: int, resume: bool, by: str, cutoff: int | None
) -> Call[Paused | None]:
    """subscriber_pause: pause (or resume) the subscriber; with `cutoff`, only if its
    circuit opened at or before it. Reads None when there is no such subscriber."""
    home = keys.home(token)
    return Call(
        "subscriber_pause",
        [keys.subscriber(token), *home.job_states(MAIN)],
        [
            home.base, token, now, "resume" if resume else "pause", by,
            "" if cutoff is None else cutoff,
        ],
        _paused,
    )  # fmt: skip


class Salted(NamedTuple):
    salt: str
    previous_until: int | None  # ms; None when no previous secret signs


def _salted(reply: Any) -> Salted | None:
    return Salted(text(reply[0]), int(reply[1]) or None) if reply else None


def secret(
    keys: Keys, token: str, rotate: bool, salt: str, now: int, grace_ms: int
) -> Call[Salted | None]:
    """subscriber_secret: reads None when there is no such subscriber."""
    return Call(
        "subscriber_secret",
        [keys.subscriber(token)],
        ["rotate" if rotate else "get", salt, now, grace_ms],
        _salted,
    )


class TopicDeleted(enum.IntEnum):
    DELETED = 1
    MISSING = 0
    NOT_PUBLISHER = -1


def topic_delete(keys: Keys, topic: str, caller: str | None) -> Call[TopicDeleted]:
    """`caller`: the token asking, None for the root key."""
    return Call(
        "topic_delete",
        [keys.topics, keys.topic(topic), keys.topic_subscribers(topic), keys.subscribers],
        [topic, caller or ""],
        TopicDeleted,
    )


class Requeued(NamedTuple):
    events: int
    left: int  # dead letters left


def _requeued(reply: Any) -> Requeued | None:
    return None if int(reply[0]) < 0 else Requeued(int(reply[0]), int(reply[1]))


def deadletters_replay(keys: Keys, token: str, now: int, most: int) -> Call[Requeued | None]:
    """Requeue at most `most` of the oldest dead letters; None: no such subscriber."""
    home = keys.home(token)
    return Call(
        "deadletters_replay",
        [
            keys.subscriber(token), keys.deadletters(token), home.event_gauge,
            home.batch_gauge, home.counters, *home.job_states(MAIN),
        ],
        [home.base, token, now, most],
        _requeued,
    )  # fmt: skip


def swap(key: str, field: str, read: str, new: str) -> Call[bool]:
    """hash_swap: a hash's field replaced if it is still `read`; reads whether it was."""
    return Call("hash_swap", [key], [field, read, new], as_bool)


class LaneFigures(NamedTuple):
    lane: int
    batches: int
    events: int
    oldest: int  # the creation time of its oldest batch (ms)
    estimated: bool  # its events estimated: a lane list not walked to its end


class Listed(NamedTuple):
    """What subscriber_listing reads of one subscriber (GET /subscriptions)."""

    fields: dict[bytes, bytes]  # the subscriber hash, as stored
    routes: dict[bytes, bytes]
    queued: int
    deadletters: int
    in_flight: int
    oldest: int | None  # the creation time of its oldest lane head; None: nothing queued
    lanes: tuple[LaneFigures, ...]


def _pairs(flat: list[bytes]) -> dict[bytes, bytes]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _listed(reply: Any) -> list[Listed | None]:
    found: list[Listed | None] = []
    for row in reply:
        if not row:
            found.append(None)
            continue
        fields, routes, queued, dead, flying, head, flat = row
        lanes = tuple(
            LaneFigures(flat[i], flat[i + 1], flat[i + 2], flat[i + 3], bool(flat[i + 4]))
            for i in range(0, len(flat), 5)
        )
        found.append(
            Listed(_pairs(fields), _pairs(routes), queued, dead, flying, head or None, lanes)
        )
    return found


def listing(home: Place, tokens: list[str], walk: int, budget: int) -> Call[list[Listed | None]]:
    """subscriber_listing of some subscribers of one shard: the figures of each, None for
    one with no subscriber hash (deleted since it was listed), up to where the call's
    budget of Redis calls ran out (one at least): the caller asks again for the rest."""
    return Call(
        "subscriber_listing", [home.event_gauge], [home.base, walk, budget, *tokens], _listed
    )
