"""The schema scripts' KEYS and ARGV and their replies: schema_put, schema_delete and
schema_deprecate, each built in one place (lib/schemas.lua holds the layout).
spec/app/models/test_script_calls.py checks them against their headers."""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

from app.lua.call import Call
from app.models.keys import Keys

VERSIONS_KEPT = 20  # versions of one type's schema kept (listed, readable); older go


class Changed(enum.IntEnum):
    """What a schema script did."""

    DONE = 1  # stored as a new version, removed, or marked
    SAME = 0  # PUT: the same schema as the current version; otherwise: nothing there
    NOT_YOURS = -1  # the topic belongs to another publisher


class Put(NamedTuple):
    status: Changed
    version: int


def _put(reply: Any) -> Put:
    return Put(Changed(int(reply[0])), int(reply[1]))


def _changed(reply: Any) -> Changed:
    return Changed(int(reply))


def schema_put(keys: Keys, topic: str, caller: str, type_: str, schema: str, now: int) -> Call[Put]:
    """`caller`: the client's token, '' for the root key."""
    return Call(
        "schema_put",
        [keys.topics, keys.topic(topic), keys.topic_schemas(topic)],
        [topic, caller, type_, schema, now, VERSIONS_KEPT, keys.catalog.base],
        _put,
    )


def schema_delete(keys: Keys, topic: str, caller: str, type_: str) -> Call[Changed]:
    return Call(
        "schema_delete",
        [keys.topic(topic), keys.topic_schemas(topic)],
        [topic, caller, type_, VERSIONS_KEPT, keys.catalog.base],
        _changed,
    )


def schema_deprecate(
    keys: Keys, topic: str, caller: str, type_: str, version: int, deprecated: bool
) -> Call[Changed]:
    return Call(
        "schema_deprecate",
        [keys.topic(topic), keys.topic_schemas(topic)],
        [caller, type_, version, "1" if deprecated else "0"],
        _changed,
    )
