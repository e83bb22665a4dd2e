"""A topic's event schemas as its publisher and its readers meet them: store a version,
mark one deprecated, remove a type's, list and read them (docs/filters.md).

Changes are scripts (schema_put, schema_delete, schema_deprecate: the caller's claim is
checked with the write); reads are one HGETALL of the topic's schemas hash. The caller
is a client's token, or None for the root key. What a publish is checked against is
read elsewhere, once per change (app/services/topic_rules.py).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import redis

from app.codec import EVENT_TYPES
from app.errors import Forbidden, InvalidInput, NotFound
from app.lua import Scripts
from app.models.keys import Keys
from app.models.schema_calls import Changed, Put, schema_delete, schema_deprecate, schema_put
from app.models.schemas import SchemaBounds, parse_schema
from app.models.validate import digits
from app.redis_client import text
from app.services.operations import TOPIC


def when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def event_type(name: str) -> str:
    if name not in EVENT_TYPES:
        raise InvalidInput(f"type must be one of {', '.join(EVENT_TYPES)}; not {name!r}")
    return name


class SchemaStore:
    def __init__(self, client: redis.Redis, keys: Keys, scripts: Scripts) -> None:
        self._redis = client
        self._keys = keys
        self._scripts = scripts

    def put(
        self, topic: str, caller: str | None, type_: str, raw: Any, bounds: SchemaBounds, now: int
    ) -> dict[str, Any]:
        """Stores `raw` as the type's next version (or finds it is the current one)."""
        if topic == TOPIC:
            raise Forbidden(f"{TOPIC} is the bus's own topic: its events have no schema to set")
        stored = parse_schema(raw, bounds)
        put: Put = self._scripts.run(
            schema_put(self._keys, topic, caller or "", event_type(type_), stored, now)
        )
        if put.status is Changed.NOT_YOURS:
            raise Forbidden(f"only the publisher of {topic} or the root key may set its schemas")
        return {**self.read(topic, type_), "changed": put.status is Changed.DONE}

    def delete(self, topic: str, caller: str | None, type_: str) -> None:
        done = self._scripts.run(schema_delete(self._keys, topic, caller or "", event_type(type_)))
        if done is Changed.NOT_YOURS:
            raise Forbidden(f"only the publisher of {topic} or the root key may remove its schemas")
        if done is Changed.SAME:
            raise NotFound(f"topic {topic} has no schema for {type_} events")

    def deprecate(
        self, topic: str, caller: str | None, type_: str, version: int, deprecated: bool
    ) -> dict[str, Any]:
        call = schema_deprecate(
            self._keys, topic, caller or "", event_type(type_), version, deprecated
        )
        done = self._scripts.run(call)
        if done is Changed.NOT_YOURS:
            raise Forbidden(
                f"only the publisher of {topic} or the root key may deprecate its schemas"
            )
        if done is Changed.SAME:
            raise NotFound(f"topic {topic} keeps no version {version} of its {type_} schema")
        return self.read(topic, type_, version)

    def _fields(self, topic: str) -> dict[str, str]:
        found = self._redis.hgetall(self._keys.topic_schemas(topic))
        return {text(k): text(v) for k, v in found.items()}

    def listing(self, topic: str) -> list[dict[str, Any]]:
        """Each type that has a schema: its current version and the versions kept (no
        schema bodies: GET .../schemas/<type> has those)."""
        fields = self._fields(topic)
        return [_summary(fields, t) for t in EVENT_TYPES if t in fields]

    def read(self, topic: str, type_: str, version: int | None = None) -> dict[str, Any]:
        fields = self._fields(topic)
        event_type(type_)
        if type_ not in fields:
            raise NotFound(f"topic {topic} has no schema for {type_} events")
        number = int(fields[type_]) if version is None else version
        stored = fields.get(f"{type_}:{number}")
        if stored is None:
            raise NotFound(f"topic {topic} keeps no version {number} of its {type_} schema")
        return {
            "topic": topic,
            **_version(number, stored),
            "type": type_,
            "current": int(fields[type_]),
            "schema": json.loads(stored.split("|", 2)[2]),
            "versions": _versions(fields, type_),
        }


def _version(number: int, stored: str) -> dict[str, Any]:
    at, deprecated, _body = stored.split("|", 2)
    return {"version": number, "at": when(int(at)), "deprecated": deprecated == "1"}


def _versions(fields: dict[str, str], type_: str) -> list[dict[str, Any]]:
    found = []
    for field, value in fields.items():
        name, _, number = field.partition(":")
        if name == type_ and digits(number):
            found.append(_version(int(number), value))
    return sorted(found, key=lambda v: v["version"])


def _summary(fields: dict[str, str], type_: str) -> dict[str, Any]:
    """The type's current version, and every version kept."""
    current = int(fields[type_])
    versions = _versions(fields, type_)
    now = next((v for v in versions if v["version"] == current), {})
    return {"type": type_, **now, "versions": versions}
