"""Delivery log entries for the Spark tests, in the layout deliver_ack.lua writes."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, cast

import msgpack
import redis

from app import codec
from app.models import event_ids
from app.models.keys import Keys
from spark.offsets import Entry

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY_MS = 86_400_000


def log_key(partition: int, prefix: str = "busbar:") -> str:
    """The delivery log stream of shard `partition` (the data source reads shard n as its
    partition n)."""
    return Keys(prefix).shard(partition).delivery_log


@dataclass
class LogWriter:
    """Appends acknowledged batches to shard n's stream; remembers what it wrote."""

    client: redis.Redis
    prefix: str = "busbar:"
    written: list[dict[str, Any]] = field(default_factory=list)
    batch_id: int = 0

    def batch(
        self,
        partition: int,
        events: int = 2,
        subscriber: str = "sub",
        priority: int = 10,
        delivered_at: int = BASE_MS,
        entry_id: str = "*",
        with_data: bool = True,
    ) -> str:
        self.batch_id += 1
        packed: list[bytes] = []
        rows: list[dict[str, Any]] = []
        for i in range(events):
            n = len(self.written) + len(rows)
            data = {"n": n, "name": f"e{n}"} if with_data and i % 2 == 0 else None
            event = ("widgets", "update", f"https://example.com/widgets/{n}", 1000 + n, data)
            packed.append(b"0|" + codec.pack_event(*event))
            rows.append(
                {
                    "id": event_ids.of_entry(packed[-1], codec.unpack_entry(packed[-1])),
                    "subscriber": subscriber,
                    "topic": "widgets",
                    "type": "update",
                    "url": event[2],
                    "t": event[3],
                    "data": data,
                    "priority": None if priority == 10 else priority,
                    "batch_id": self.batch_id,
                    "partition": partition,
                    "delivered_at": delivered_at,
                    "position": i,
                }
            )
        raw_id = self.client.xadd(
            log_key(partition, self.prefix),
            {
                "subscriber": subscriber,
                "priority": priority,
                "batch_id": self.batch_id,
                "created_at": delivered_at - 500,
                "first_attempt_at": delivered_at - 100,
                "delivered_at": delivered_at,
                "attempts": 1,
                "events": codec.pack_log_events(packed),
            },
            id=entry_id,
        )
        new_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
        for row in rows:
            row["stream_id"] = new_id
        self.written.extend(rows)
        return new_id

    def fill(self, batches: int, partitions: int = 4, events: int = 2) -> list[str]:
        return [self.batch(i % partitions, events=events) for i in range(batches)]

    def erase(self, partition: int, stream_id: str, blank: Collection[int] | None = None) -> None:
        """Erase a written entry (whole, or the events at the positions `blank`) and
        forget its rows that are gone (an id names an entry in its stream only)."""
        erase(self.client, log_key(partition, self.prefix), stream_id, blank)
        self.written = [r for r in self.written if not self._gone(r, partition, stream_id, blank)]

    @staticmethod
    def _gone(
        row: dict[str, Any], partition: int, stream_id: str, blank: Collection[int] | None
    ) -> bool:
        if (row["partition"], row["stream_id"]) != (partition, stream_id):
            return False
        return blank is None or row["position"] in blank


def erase(
    client: redis.Redis, key: str, entry_id: str, blank: Collection[int] | None = None
) -> None:
    """What a step of an erasure does to a stream entry (app/lua/lib/erasure.lua), by
    hand: XDEL it and name it in the stream's `:erased` companion, `''` when erased whole
    (blank None), else its fields as XRANGE gives them, flat, with the events at the
    positions `blank` blanked; and count it in `n`. Packed as Redis's cmsgpack packs a
    Lua string (msgpack str, not bin), as the erasure script writes it."""
    ((_, fields),) = cast(list[Entry], client.xrange(key, entry_id, entry_id))
    value = b""
    if blank is not None:
        events = msgpack.unpackb(fields[b"events"], raw=True)
        kept = [b"" if i in blank else event for i, event in enumerate(events)]
        fields[b"events"] = msgpack.packb(kept, use_bin_type=False)
        value = msgpack.packb([x for pair in fields.items() for x in pair], use_bin_type=False)
    pipe = client.pipeline(transaction=True)
    pipe.xdel(key, entry_id)
    pipe.hset(f"{key}:erased", entry_id, value)
    pipe.hincrby(f"{key}:erased", "n", 1)
    pipe.execute()
