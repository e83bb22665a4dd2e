"""Delivery log entries for the Spark tests, in the layout deliver_ack.lua writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis

from app import codec
from app.models import event_ids
from app.models.keys import Keys

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
            event = ["widgets", "update", f"https://example.com/widgets/{n}", 1000 + n, data]
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
