"""A stream's `:erased` companion: what an erasure (app/lua/lib/erasure.lua) took out of
the stream, so the readers can take it as if it were still there, less what was erased.

A Redis stream cannot be edited, so an erasure XDELs the entry and records it, in the
same script, in the hash `<stream key>:erased` (the same hash tag, so the same slot):

    n           how many entries erasure ever XDEL'd from the stream (only grows)
    <entry id>  '' (nothing of the entry is left) or, for a delivery log entry that held
                other events too, its replacement: msgpack of the flat list of its fields
                as XRANGE gave them, with each erased event of `events` blanked ('')
                (and of `source`, the events as queued where a transform changed them)

A reader counts every id of the companion in a range as an entry read (never as one
trimmed: XDEL lowers the stream's length, which alone no longer tells the trimmed ones)
and reads a replacement in place of the entry, at its id. Ids older than the stream's
first entry may be dropped (HDEL) by a later erasure; `n` stays.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgpack

if TYPE_CHECKING:
    from spark.offsets import Entry

SUFFIX = ":erased"
COUNT = b"n"

Id = tuple[int, int]


def key(stream: str) -> str:
    """The companion of a stream."""
    return stream + SUFFIX


def entry_id(field: bytes | str) -> Id | None:
    """A companion field as a stream id (`<ms>-<seq>`), None for `n` or anything else:
    an unknown field is never taken for an entry."""
    text = field.decode() if isinstance(field, bytes) else field
    ms, dash, seq = text.partition("-")
    if not (dash and ms.isdigit() and seq.isdigit()):
        return None
    return int(ms), int(seq)


def ids(fields: Iterable[bytes | str]) -> tuple[Id, ...]:
    """The entry ids among a companion's fields (HKEYS), in stream order."""
    return tuple(sorted(i for i in map(entry_id, fields) if i is not None))


def count(reply: Any) -> int:
    """The companion's `n` (HGET); a stream erasure never touched has none."""
    return int(reply or 0)


@dataclass(frozen=True)
class StandIn:
    """An erased entry in a range: `entry` is its replacement, None when nothing is left."""

    id: Id
    entry: Entry | None


def replacement(raw_id: bytes, value: bytes) -> Entry | None:
    """The entry a companion value stands for: None for '' (erased whole), else the
    fields of the msgpack flat list `[field, value, ...]`."""
    if not value:
        return None
    flat = msgpack.unpackb(value, raw=True)
    return raw_id, dict(zip(flat[::2], flat[1::2], strict=True))


def stand_ins(companion: Mapping[bytes, bytes], after: Id, until: Id) -> list[StandIn]:
    """The companion's entries with ids in (after, until], in stream order. The whole hash
    is read (HGETALL) and filtered here: it is small beside the range itself (ids older
    than the stream's first entry are dropped by the next erasure), and one HGETALL is
    one command in the transaction that reads the range, where HSCAN may take several
    calls, outside it."""
    found = []
    for field, value in companion.items():
        at = entry_id(field)
        if at is not None and after < at <= until:
            found.append(StandIn(at, replacement(field, value)))
    return sorted(found, key=lambda s: s.id)


def merged(entries: list[Entry], found: list[StandIn]) -> list[Entry]:
    """The range's entries with the replacements in their places, in id order; an entry
    erased whole is simply not there. Were an id both in the stream and the companion,
    the companion's would be read: an erased event never goes through."""
    replaced = {s.id: s.entry for s in found if s.entry is not None}
    if not replaced:
        return entries
    by_id: dict[Id, Entry] = {}
    for entry in entries:
        at = entry_id(entry[0])
        if at is not None:
            by_id[at] = entry
    by_id.update(replaced)
    return [by_id[at] for at in sorted(by_id)]
