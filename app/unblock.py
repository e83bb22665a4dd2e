"""A stopping worker's blocked takes, ended at once rather than waited out.

An idle delivery slot watching a shard, and the aux thread, block in BLMOVE for up to
BUSBAR_ACQUIRE_TIMEOUT, and the schedulers on their bells (BLPOP, workers/scheduler.py);
a stop (SIGTERM: a deploy, a scale-down) waited that long for them, a second by default
and up to a minute as configured. Their connections carry the worker's name (CLIENT
SETNAME, `blocking_name`), so the stopping worker asks Redis to end its blocked ones now
(CLIENT UNBLOCK): each answers as if it had timed out. Redis
moves nothing for a take it ends so, and a job a take moved just before is in the slot's
pending list, given back as the worker leaves, as at any stop. Where the server refuses
CLIENT LIST or CLIENT UNBLOCK (an ACL), the stop waits the takes out as before.
"""

from __future__ import annotations

from typing import Any

import redis

from app.redis_client import is_cluster


def blocking_name(worker_id: str) -> str:
    """The name of a worker's blocking connections (CLIENT SETNAME takes no spaces)."""
    return f"busbar:{worker_id}"


def unblock(client: redis.Redis, name: str) -> int:
    """End every blocked command of the connections named `name`, on every primary;
    returns how many were ended."""
    ended = 0
    nodes: list[Any] = client.get_primaries() if is_cluster(client) else [None]  # type: ignore[attr-defined]
    for node in nodes:
        where = {} if node is None else {"target_nodes": node}
        for row in client.client_list(_type="normal", **where):
            if row.get("name") == name and "b" in row.get("flags", ""):
                ended += bool(client.client_unblock(int(row["id"]), **where))
    return ended
