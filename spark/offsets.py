"""Positions in the delivery log streams, and the rules for where reading starts
(docs/internals.md, The Spark lake).

A position is the last consumed entry id of one stream partition plus `n`, the number of
entries ever added to that stream up to and including that id (the stream's
`entries-added` counter at that point). The id alone cannot tell whether entries were
trimmed after it: deliver_ack.lua trims with MAXLEN, which removes the consumed checkpoint
entry itself all the time, and XTRIM does not update `max-deleted-entry-id`. With `n`,
the count is exact: `entries-added - length` entries are gone, and those beyond `n` were
never read. An erasure XDELs entries too, and names each in the stream's `:erased`
companion (spark/erased.py): those count as entries wherever entries are counted, so
they are never taken for trimmed ones.

A Spark offset is `{"<partition>": {"id": "<ms>-<seq>", "n": <int>}, ...}` in partition
order: JSON-serialisable with a stable key order, as Spark compares offsets as text.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import redis
from redis.cluster import RedisCluster

from spark import erased as companion
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


def format_id(pair: tuple[int, int]) -> str:
    """A comparable pair (parse_id) as a stream id again."""
    return f"{pair[0]}-{pair[1]}"


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
    """What XINFO STREAM and the `:erased` companion say about one partition, read in one
    transaction; a missing key is an empty stream."""

    added: int = 0
    length: int = 0
    first: str | None = None
    last_generated: str = ORIGIN
    erased: int = 0  # the companion's `n`: entries erasure ever XDEL'd
    erased_ids: tuple[companion.Id, ...] = ()  # those it still names, in stream order

    @property
    def trimmed(self) -> int:
        """Entries removed from the head by MAXLEN: of those no longer in the stream,
        all but the ones erasure XDEL'd (deliver_ack.lua never XDELs; an erasure counts
        each in the companion's `n`, which stays when their ids are dropped)."""
        return self.added - self.length - self.erased

    @property
    def oldest(self) -> str | None:
        """The oldest entry still held, in the stream or in the companion: an erasure
        that rewrote the first entries (or all: the stream is empty) leaves them there,
        before the stream's first entry, and what they kept is still to be read."""
        held = [parse_id(self.first)] if self.first is not None else []
        held += self.erased_ids[:1]
        return format_id(min(held)) if held else None

    @property
    def head(self) -> int:
        """Entries added before the oldest entry held (trimmed, or erased and dropped
        from the companion): the `n` of the position just before it."""
        return self.added - self.length - len(self.erased_ids)

    def erased_after(self, entry_id: str) -> int:
        """Erased entries the companion names after this id."""
        return len(self.erased_ids) - bisect.bisect_right(self.erased_ids, parse_id(entry_id))

    def erased_in(self, after: str, until: str) -> tuple[companion.Id, ...]:
        """The erased entries the companion names in (after, until]."""
        low = bisect.bisect_right(self.erased_ids, parse_id(after))
        return self.erased_ids[low : bisect.bisect_right(self.erased_ids, parse_id(until))]

    def lost_after(self, start: Position) -> int:
        """Entries after `start` trimmed before they were read. Nothing when the stream
        still holds an entry at or before `start` (MAXLEN trims the head only); else each
        entry after it is in the stream, erased (named by the companion) or trimmed. An
        erased id older than the stream's first entry may have been dropped from the
        companion, and then counts here as trimmed: nothing tells where the dropped ones
        were, only how many (`erased - len(erased_ids)`), and a loss is better reported
        than missed."""
        if self.first is not None and parse_id(start.id) >= parse_id(self.first):
            return 0
        still = self.length + self.erased_after(start.id)
        return max(0, self.added - start.n - still)

    @classmethod
    def from_replies(cls, stream: Any, count: Any = None, fields: Any = ()) -> StreamInfo:
        """XINFO STREAM, HGET <companion> n and HKEYS <companion>, as a pipeline returns
        them; a companion without its stream (deleted, recreated) is not its any more."""
        if isinstance(stream, Exception):
            if "no such key" in str(stream).lower():
                return cls()
            raise stream
        for reply in (count, fields):
            if isinstance(reply, Exception):
                raise reply
        # a cluster client's transaction leaves XINFO's reply as the server gave it
        reply = {k.decode() if isinstance(k, bytes) else k: v for k, v in stream.items()}
        first = reply.get("first-entry")
        return cls(
            added=int(reply["entries-added"]),
            length=int(reply["length"]),
            first=first[0].decode() if first else None,
            last_generated=reply["last-generated-id"].decode(),
            erased=companion.count(count),
            erased_ids=companion.ids(fields or ()),
        )


def queue_info(pipe: Any, key: str) -> None:
    """The three commands StreamInfo.from_replies reads, queued on a pipeline."""
    pipe.xinfo_stream(key)
    pipe.hget(companion.key(key), companion.COUNT)
    pipe.hkeys(companion.key(key))


def stream_infos(client: redis.Redis, keys: Iterable[str]) -> list[StreamInfo]:
    """XINFO STREAM and the companion of several streams, each stream's in one transaction
    (an erasure between them would make its XDEL look like a trim, or not count at all):
    on one Redis, all in one round trip; on a cluster a transaction stays in one slot,
    so one per stream."""
    keys = list(keys)
    if isinstance(client, RedisCluster):
        return [_infos(client, [key])[0] for key in keys]
    return _infos(client, keys)


def _infos(client: redis.Redis, keys: list[str]) -> list[StreamInfo]:
    pipe = client.pipeline(transaction=True)
    for key in keys:
        queue_info(pipe, key)
    replies = pipe.execute(raise_on_error=False)
    return [StreamInfo.from_replies(*replies[i : i + 3]) for i in range(0, len(replies), 3)]


def earliest(info: StreamInfo) -> Position:
    """Just before the oldest entry still held (spark/erased.py's included): trimmed
    entries are not a loss."""
    oldest = info.oldest
    if oldest is None:
        return Position(info.last_generated, info.added)
    return Position(predecessor(oldest), info.head)


def floor(start: Position, info: StreamInfo) -> Position:
    """Where reading after `start` really begins: `start`, or just before the oldest entry
    held when everything between them is gone (what was lost there is check's to report)."""
    first = earliest(info)
    return first if parse_id(start.id) < parse_id(first.id) else start


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
    lost = info.lost_after(start)
    if lost <= 0:
        return 0
    message = (
        f"{label} partition {partition}: {lost} entries after {start.id} were "
        f"trimmed (MAXLEN) before they were read; continuing at the first available entry "
        f"{info.oldest or info.last_generated}"
    )
    if fail_on_data_loss:
        raise DataLossError(message.split("; ")[0] + " (failOnDataLoss=true)")
    log.warning(message)
    return lost


Entry = tuple[bytes, dict[bytes, bytes]]


def entries_of(reply: Any) -> list[Entry]:
    """XRANGE's reply as (id, fields) pairs: a cluster client's transaction leaves it as
    the server gave it, each entry's fields a flat list."""
    return [
        (
            raw_id,
            fields
            if isinstance(fields, dict)
            else dict(zip(fields[::2], fields[1::2], strict=True)),
        )
        for raw_id, fields in reply
    ]


def xrange_after(client: redis.Redis, key: str, after: str, until: str, count: int) -> list[Entry]:
    """Up to `count` entries in (after, until], typed as a client without decoding returns."""
    return cast(list[Entry], client.xrange(key, f"({after}", until, count=count))


def count_after(client: redis.Redis, key: str, after: str, until: str, info: StreamInfo) -> int:
    """Entries in (after, until], the erased ones `info` names among them: XRANGE is the
    only way to count a range of a stream. The companion's ids come from `info`, read
    before the stream: an entry erased in between is counted by neither, which gives a
    position one entry too many, never a loss that was not."""
    total, cursor = len(info.erased_in(after, until)), after
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
    possible loss, an error with failOnDataLoss. When none were ever trimmed (entries
    erased before the first one, only), it is counted like any other.
    """
    info = stream_infos(client, [key])[0]
    if parse_id(entry_id) > parse_id(info.last_generated):
        raise OffsetAheadError(
            f"{label} partition {partition}: offset {entry_id} is ahead of the "
            f"stream (last id {info.last_generated})"
        )
    first = info.oldest or info.last_generated
    if info.trimmed > 0 and parse_id(entry_id) < parse_id(predecessor(first)):
        message = (
            f"{label} partition {partition}: offset {entry_id} is older than the "
            f"first available entry {first}; entries after it may have been trimmed"
        )
        if fail_on_data_loss:
            raise DataLossError(message + " (failOnDataLoss=true)")
        log.warning(message + "; starting at the first available entry")
        return earliest(info)
    after = count_after(client, key, entry_id, info.last_generated, info)
    return Position(entry_id, info.added - after)
