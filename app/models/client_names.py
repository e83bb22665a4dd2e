"""Names shared by clients made before a name was one client's, found and mended
(`busbar clients shared` and `rename`, app/clients_admin.py; docs/operating.md).

Such clients are told apart by what they do (subscribe, publish, call back where) and
named by the fingerprint of their key (app/models/tokens.py fingerprint), never by a
token. A rename is two steps, as every change of a subscriber: the catalog's
(client_rename.lua: the name is free, then it is this client's), then the shard's (its
subscriber hash's `name`, which its deliveries, attempts and operational events carry
into the lake from then on). A rename cut short between them is finished by running it
again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urlsplit

import redis

from app.errors import Conflict, NotFound
from app.lua import Scripts
from app.models import token_calls
from app.models.keys import Keys
from app.models.subscriber_calls import swap
from app.models.token_calls import Renamed
from app.models.tokens import fingerprint, validate_name
from app.models.topics import TopicStore
from app.redis_client import text


@dataclass(frozen=True)
class Namesake:
    """One of the clients that share a name, as an operator tells them apart."""

    fingerprint: str
    subscribes: list[str]  # its subscription's topics
    callback: str | None  # its callback's origin (a path or query may hold a secret)
    publishes: list[str]  # the topics it publishes
    operator: bool


def _origin(callback: bytes | None) -> str | None:
    if not callback:
        return None
    parts = urlsplit(text(callback))
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"


class ClientNames:
    def __init__(self, client: redis.Redis, keys: Keys, scripts: Scripts) -> None:
        self._redis = client
        self._keys = keys
        self._scripts = scripts

    def shared(self) -> dict[str, list[Namesake]]:
        """Every name more than one client carries, with those clients."""
        k = self._keys
        by_name: dict[str, list[str]] = {}
        for key, name in self._redis.hgetall(k.tokens).items():
            by_name.setdefault(text(name), []).append(text(key))
        shared = {name: sorted(keys) for name, keys in sorted(by_name.items()) if len(keys) > 1}
        if not shared:
            return {}
        published: dict[str, list[str]] = {}
        for topic in TopicStore(self._redis, k, self._scripts).all():
            if topic.publisher_token is not None:
                published.setdefault(topic.publisher_token, []).append(topic.name)
        found: dict[str, list[Namesake]] = {}
        for name, keys in shared.items():
            pipe = self._redis.pipeline(transaction=False)
            for key in keys:
                pipe.hget(k.subscribers, key)
                pipe.hget(k.subscriber(key), "callback")
                pipe.sismember(k.operators, key)
            replies = pipe.execute()
            found[name] = [
                Namesake(
                    fingerprint(key),
                    json.loads(topics) if topics else [],
                    _origin(callback),
                    published.get(key, []),
                    bool(operator),
                )
                for key, topics, callback, operator in zip(
                    keys, replies[0::3], replies[1::3], replies[2::3], strict=True
                )
            ]
        return found

    def key_of(self, given: str) -> str:
        """The key of the client `given` names: a fingerprint (of its key or of any of its
        tokens), or one of its tokens. NotFound names neither."""
        k = self._keys
        pipe = self._redis.pipeline(transaction=False)
        pipe.hgetall(k.tokens)
        pipe.hgetall(k.aliases)
        stored, aliases = pipe.execute()
        owners = {text(key): text(key) for key in stored}
        owners |= {text(t): text(key) for t, key in aliases.items() if key in stored}
        if given.startswith("fp_"):
            matches = {key for token, key in owners.items() if fingerprint(token) == given}
            if len(matches) > 1:
                raise Conflict(f"{len(matches)} clients have fingerprint {given}; name a token")
            if matches:
                return matches.pop()
        elif given in owners:
            return owners[given]
        raise NotFound("no client has that fingerprint or token")

    def rename(self, key: str, name: str) -> Renamed:
        """The catalog's step, then the subscriber hash's (when it has a subscription)."""
        validate_name(name)
        renamed = self._scripts.run(token_calls.rename(self._keys, key, name))
        hash_key = self._keys.subscriber(key)
        stored = self._redis.hget(hash_key, "name")
        if stored is not None and text(stored) != name:
            self._scripts.run(swap(hash_key, "name", text(stored), name))
        return renamed
