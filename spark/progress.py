"""One line per micro-batch of `busbar spark ingest`: rows, seconds, and the lag.

The lag is what the log holds that the lake does not yet: entries added to the streams
after this batch's end offset (a position carries the stream's `entries-added` count at
that entry, spark/offsets.py, so one XINFO per partition gives it exactly), and how old
the oldest of them is. "lag 0 entries" means the lake has caught up.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

from spark import offsets
from spark.connect import open_client

Printer = Callable[[str], None]


def lag(client: redis.Redis, keys: Sequence[str], end: dict[int, offsets.Position]) -> str:
    infos = offsets.stream_infos(client, keys)
    behind = sum(max(0, info.added - end[p].n) for p, info in enumerate(infos) if p in end)
    if not behind:
        return "lag 0 entries"
    oldest = None
    for p, key in enumerate(keys):
        if p in end and (first := offsets.xrange_after(client, key, end[p].id, "+", 1)):
            ms = offsets.parse_id(first[0][0].decode())[0]
            oldest = ms if oldest is None else min(oldest, ms)
    age = f", oldest {time.time() - oldest / 1000:.1f} s old" if oldest else ""
    return f"lag {behind} entries{age}"


class ProgressLines:
    """Prints each micro-batch once, from the query's progress reports, polled by the
    caller (no listener thread: the lines come out in order, the last one included)."""

    def __init__(
        self,
        redis_url: str,
        keys: Sequence[str],
        out: Printer,
        cluster: bool = False,
        prefix: str = "",
    ) -> None:
        self.redis_url = redis_url
        self.prefix = prefix  # which table's batches, when it is not the events table
        self.cluster = cluster
        self.keys = list(keys)
        self.out = out
        self.last_batch = -1

    def report(self, progress: Sequence[Any]) -> None:
        """Reports of batches that ran: an idle query also reports now and then, under
        the id of the batch it will run next, with no `addBatch` time."""
        for p in progress:
            if p.batchId <= self.last_batch or "addBatch" not in p.durationMs:
                continue
            self.last_batch = p.batchId
            took = p.batchDuration / 1000
            self.out(f"{self.prefix}batch {p.batchId}: {p.numInputRows} rows in {took:.1f} s, "
                     f"{self._lag(p)}")  # fmt: skip

    def _lag(self, p: Any) -> str:
        try:
            end = offsets.from_offset(json.loads(p.sources[0].endOffset))
            with open_client(self.redis_url, self.cluster, timeout=5) as client:
                return lag(client, self.keys, end)
        except (redis.RedisError, ValueError, IndexError, TypeError) as exc:
            return f"lag unknown ({type(exc).__name__})"
