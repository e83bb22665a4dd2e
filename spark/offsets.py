"""Positions in the delivery log streams, and the rules for where reading starts
(docs/internals.md, The Spark lake).

A position is the last consumed entry id of one stream partition plus `n`, the number of
entries ever added to that stream up to and including that id (the stream's
`entries-added` counter at that point). The id alone cannot tell whether entries were
trimmed after it: deliver_ack.lua trims with MAXLEN, which removes the consumed checkpoint
entry itself all the time, and XTRIM does not update `max-deleted-entry-id`. With `n`,
the count is exact: `entries-added - length` entries are gone from the head, and those
beyond `n` were never read.

A Spark offset is `{"<partition>": {"id": "<ms>-<seq>", "n": <int>}, ...}` in partition
order: JSON-serialisable with a stable key order, as Spark compares offsets as text.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import redis

from spark.errors import DataLossError, OffsetAheadError, OptionError

log = logging.getLogger(__name__)

ORIGIN = "0-0"
MAX_SEQ = 2**64 - 1


def parse_id(entry_id: str) -> tuple[int, int]:
    """A stream id as a comparable pair; a bare `<ms>` means `<ms>-0`."""
    ms, _, seq = entry_id.partition("-")
    try:
        pair = (int(ms), int(seq or 0))
    except ValueError:
        raise OptionError(f"not a stream entry id: {entry_id!r} (expected <ms>-<seq>)") from None
    if pair[0] < 0 or pair[1] < 0:
        raise OptionError(f"not a stream entry id: {entry_id!r} (expected <ms>-<seq>)")
    return pair


def predecessor(entry_id: str) -> str:
    """The greatest id below this one: an exclusive start that still includes the entry."""
    ms, seq = parse_id(entry_id)
    if seq > 0:
        return f"{ms}-{seq - 1}"
    return f"{ms - 1}-{MAX_SEQ}" if ms > 0 else ORIGIN


@dataclass(frozen=True)
class Position:
    """Last consumed entry of one stream (ORIGIN: none) and the entries added up to it."""

    id: str
    n: int

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "n": self.n}

    @classmethod
    def from_json(cls, value: Any) -> Position:
        if not isinstance(value, Mapping) or "id" not in value or "n" not in value:
            raise OptionError(f"not a busbar stream offset: {value!r}")
        parse_id(str(value["id"]))
        return cls(str(value["id"]), int(value["n"]))


def to_offset(positions: Mapping[int, Position]) -> dict[str, Any]:
    """Positions as a Spark offset, keys in partition order."""
    return {str(p): positions[p].to_json() for p in sorted(positions)}


def from_offset(offset: Mapping[str, Any]) -> dict[int, Position]:
    return {int(p): Position.from_json(value) for p, value in offset.items()}


@dataclass(frozen=True)
class StreamInfo:
    """What XINFO STREAM says about one partition; a missing key is an empty stream."""

    added: int = 0
    length: int = 0
    first: str | None = None
    last_generated: str = ORIGIN

    @property
    def trimmed(self) -> int:
        """Entries removed from the head (deliver_ack.lua never XDELs, so all were trimmed)."""
        return self.added - self.length

    @classmethod
    def from_reply(cls, reply: Any) -> StreamInfo:
        if isinstance(reply, Exception):
            if "no such key" in str(reply).lower():
                return cls()
            raise reply
        first = reply.get("first-entry")
        return cls(
            added=int(reply["entries-added"]),
            length=int(reply["length"]),
            first=first[0].decode() if first else None,
            last_generated=reply["last-generated-id"].decode(),
        )


def stream_infos(client: redis.Redis, keys: Iterable[str]) -> list[StreamInfo]:
    """XINFO STREAM of several streams in one round trip."""
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.xinfo_stream(key)
    return [StreamInfo.from_reply(reply) for reply in pipe.execute(raise_on_error=False)]


def earliest(info: StreamInfo) -> Position:
    """Just before the first entry still in the stream: trimmed entries are not a loss."""
    if info.first is None:
        return Position(info.last_generated, info.added)
    return Position(predecessor(info.first), info.trimmed)


def latest(info: StreamInfo) -> Position:
    return Position(info.last_generated, info.added)


LABEL = "busbar delivery log"  # how messages name the streams (spark/tables.py's label)


def check(
    start: Position, info: StreamInfo, partition: int, fail_on_data_loss: bool, label: str = LABEL
) -> int:
    """Validate a position to resume from; return how many entries after it were trimmed.

    A position beyond the stream always fails. Lost entries fail with failOnDataLoss,
    else they are logged and reading goes on from the first available entry.
    """
    if parse_id(start.id) > parse_id(info.last_generated) or start.n > info.added:
        raise OffsetAheadError(
            f"{label} partition {partition}: the checkpoint is ahead of the stream "
            f"(checkpoint {start.id}, entry #{start.n}; stream last id {info.last_generated}, "
            f"{info.added} entries ever added). The stream was recreated or this is not the "
            "Redis the checkpoint was made with: check redis.url/keyPrefix, or start over "
            "with a new checkpoint location."
        )
    lost = info.trimmed - start.n
    if lost <= 0:
        return 0
    message = (
        f"{label} partition {partition}: {lost} entries after {start.id} were "
        f"trimmed (MAXLEN) before they were read; continuing at the first available entry "
        f"{info.first or info.last_generated}"
    )
    if fail_on_data_loss:
        raise DataLossError(message.split("; ")[0] + " (failOnDataLoss=true)")
    log.warning(message)
    return lost


Entry = tuple[bytes, dict[bytes, bytes]]


def xrange_after(client: redis.Redis, key: str, after: str, until: str, count: int) -> list[Entry]:
    """Up to `count` entries in (after, until], typed as a client without decoding returns."""
    return cast(list[Entry], client.xrange(key, f"({after}", until, count=count))


def count_after(client: redis.Redis, key: str, after: str, until: str) -> int:
    """Entries in (after, until]; XRANGE is the only way to count a range of a stream."""
    total, cursor = 0, after
    while True:
        chunk = xrange_after(client, key, cursor, until, 1000)
        total += len(chunk)
        if len(chunk) < 1000:
            return total
        cursor = chunk[-1][0].decode()


def requested(
    client: redis.Redis,
    key: str,
    entry_id: str,
    partition: int,
    fail_on_data_loss: bool,
    label: str = LABEL,
) -> Position:
    """A position named by the user (startingOffsets JSON): find its `n` by counting.

    An id older than the first available entry starts there; whether entries after the id
    were trimmed cannot be counted (the id's own `n` is unknown), so it is reported as
    possible loss, an error with failOnDataLoss.
    """
    info = stream_infos(client, [key])[0]
    if parse_id(entry_id) > parse_id(info.last_generated):
        raise OffsetAheadError(
            f"{label} partition {partition}: offset {entry_id} is ahead of the "
            f"stream (last id {info.last_generated})"
        )
    first = info.first or info.last_generated
    if info.trimmed > 0 and parse_id(entry_id) < parse_id(predecessor(first)):
        message = (
            f"{label} partition {partition}: offset {entry_id} is older than the "
            f"first available entry {first}; entries after it may have been trimmed"
        )
        if fail_on_data_loss:
            raise DataLossError(message + " (failOnDataLoss=true)")
        log.warning(message + "; starting at the first available entry")
        return earliest(info)
    return Position(entry_id, info.added - count_after(client, key, entry_id, info.last_generated))
