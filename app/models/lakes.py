"""The lakes ingests write (`P{c}:lakes`), as erasures see them: an erasure is done
once the Redis stores and every live lake have erased it. The ingest (spark/) registers
its lake and, once an erasure's Redis stores are erased (`redis_done_at`), deletes the
entity's rows and records what it removed on the erasure's record (`lake:<lake id>`).
A lake not seen for LAKE_STALE_MS no longer holds an erasure up: its receipt says so."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import redis

from app.models.keys import Keys
from app.redis_client import text

LAKE_STALE_MS = 7 * 86_400_000  # an ingest silent this long no longer holds erasures up


def lake_id(path: str) -> str:
    """The id a lake is registered under: stable for its output path, short."""
    return hashlib.sha256(path.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Lake:
    id: str
    path: str
    seen_at: int

    def live(self, now: int) -> bool:
        return now - self.seen_at < LAKE_STALE_MS


def lakes(client: redis.Redis, keys: Keys) -> list[Lake]:
    found = []
    for raw_id, raw in client.hgetall(keys.catalog.lakes).items():
        value = json.loads(raw)
        found.append(Lake(text(raw_id), str(value["path"]), int(value["seen_at"])))
    return sorted(found, key=lambda lake: lake.path)


def pending(record: dict[str, str], known: list[Lake], now: int) -> list[Lake]:
    """The live lakes that have not erased the erasure of `record` yet."""
    return [lake for lake in known if lake.live(now) and f"lake:{lake.id}" not in record]


def described(record: dict[str, str], known: list[Lake], now: int) -> list[dict[str, Any]]:
    """A receipt's `lakes`: each lake, erased (with what it removed), pending or stale."""
    out: list[dict[str, Any]] = []
    for lake in known:
        done = record.get(f"lake:{lake.id}")
        if done is not None:
            out.append({"path": lake.path, "state": "erased", **json.loads(done)})
        else:
            out.append({"path": lake.path, "state": "pending" if lake.live(now) else "stale"})
    return out
