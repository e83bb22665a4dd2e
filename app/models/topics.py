"""Topics as GET /topics and DELETE /topics/:name see them."""

from __future__ import annotations

from dataclasses import dataclass, field

import redis

from app.codec import EVENT_TYPES
from app.errors import Forbidden, NotFound
from app.lua import Scripts
from app.models.keys import SYSTEM_PUBLISHER, Keys
from app.models.subscriber_calls import TopicDeleted, topic_delete
from app.redis_client import text
from app.turn import Turn, no_turn

READ_AT_ONCE = 500  # topics a pipeline reads (TopicStore.all)


@dataclass(frozen=True)
class TopicInfo:
    name: str
    publisher_token: str | None  # a credential: shown to root and to that client only
    publisher_name: str | None
    events: int
    schemas: dict[str, int] = field(default_factory=dict)  # type -> current schema version

    def describe(self, caller: str | None) -> dict[str, object]:
        """GET /topics' entry for `caller` (a client's token; None for root): Routemaster's
        `publisher` is the token for root and for the publisher itself, who know it
        already, and the name for anyone else; `publisher_name` always the name."""
        own = caller is None or caller == self.publisher_token
        return {
            "name": self.name,
            "publisher": self.publisher_token if own else self.publisher_name,
            "events": self.events,
            "publisher_name": self.publisher_name,
            "schemas": self.schemas,
        }


class TopicStore:
    def __init__(self, client: redis.Redis, keys: Keys, scripts: Scripts) -> None:
        self._redis = client
        self._keys = keys
        self._scripts = scripts

    def all(self, owner: str | None = None, turn: Turn = no_turn) -> list[TopicInfo]:
        """Every topic, or with `owner` (a client token) those it publishes or subscribes
        to: the topics read READ_AT_ONCE a pipeline, a `turn` after each (beside 10,000
        topics the whole is 0.25 s of a web's CPU, and any client may ask for it)."""
        names = sorted(text(n) for n in self._redis.smembers(self._keys.topics))
        pipe = self._redis.pipeline(transaction=False)
        pipe.hgetall(self._keys.tokens)
        if owner is not None:
            pipe.hkeys(self._keys.routes(owner))
        tokens, *routed = pipe.execute()
        subscribed = set(routed[0]) if owner is not None else set()
        turn()
        metas: list[list[bytes | None]] = []
        for start in range(0, len(names), READ_AT_ONCE):
            pipe = self._redis.pipeline(transaction=False)
            for name in names[start : start + READ_AT_ONCE]:
                pipe.hmget(self._keys.topic(name), "publisher", "counter")
                pipe.hmget(self._keys.topic_schemas(name), *EVENT_TYPES)
            metas += pipe.execute()
            turn()
        result = []
        for name, (publisher, counter), versions in zip(
            names, metas[0::2], metas[1::2], strict=True
        ):
            if (
                owner is not None
                and publisher != owner.encode()
                and name.encode() not in subscribed
            ):
                continue
            who = tokens.get(publisher) if publisher else None
            if publisher == SYSTEM_PUBLISHER.encode():
                who = b"busbar"  # the bus's own topic (app/services/operations.py)
            result.append(
                TopicInfo(
                    name,
                    publisher.decode() if publisher else None,
                    who.decode() if who else None,
                    int(counter or 0),
                    {t: int(v) for t, v in zip(EVENT_TYPES, versions, strict=True) if v},
                )
            )
        return result

    def delete(self, name: str, caller: str | None) -> None:
        """caller: the client's token, or None for the root key (which may delete any).

        The subscribers' shards first (each drops the topic from its listed routes),
        then the catalog (unroute, forget): if a crash comes between, the topic is still
        there and the same call finishes it."""
        k = self._keys
        publisher = self._redis.hget(k.topic(name), "publisher")
        if caller is not None and publisher is not None and text(publisher) != caller:
            raise Forbidden(f"only the publisher of {name} or the root key may delete it")
        subscribed = self._redis.hkeys(k.topic_subscribers(name))
        if subscribed:
            pipe = self._redis.pipeline(transaction=False)
            for token in subscribed:
                pipe.hdel(k.routes(text(token)), name)
            pipe.execute()
        status = self._scripts.run(topic_delete(k, name, caller))
        if status is TopicDeleted.MISSING:
            raise NotFound(f"no topic named {name}")
        if status is TopicDeleted.NOT_PUBLISHER:
            raise Forbidden(f"only the publisher of {name} or the root key may delete it")
