"""Worker processes as an operator sees them: last heartbeat and jobs in hand.

A worker's threads hold their jobs in pending lists named `<worker>/<thread>` (see
app/models/queue.py), so jobs in flight are the lengths of those lists. A worker that
stopped heartbeating but still holds jobs is listed too (without a heartbeat): those
jobs wait for ScrubQueues, which is what an operator looking at a stuck queue needs to
know. A worker that exited cleanly holds nothing and is not listed.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from app.models.keys import AUX, MAIN, Keys
from app.models.queue import process_of
from app.redis_client import server_time_ms


@dataclass(frozen=True)
class WorkerInfo:
    worker: str
    last_heartbeat: int | None
    heartbeat_age_ms: int | None
    alive: bool
    jobs_in_flight: int


def list_workers(client: redis.Redis, keys: Keys, dead_after_ms: int) -> list[WorkerInfo]:
    """Two pipelined round trips whatever the number of workers and threads. Heartbeats
    are read from the catalog's workers hash (every worker beats there and on each
    shard); jobs in flight are counted over the catalog's aux and every shard's main."""
    queues = [(AUX, keys.catalog)] + [(MAIN, shard) for shard in keys.all_shards()]
    now = server_time_ms(client, keys.catalog.workers)
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(keys.catalog.workers)
    for queue, place in queues:
        pipe.smembers(place.jobs_pending_index(queue))
    beats, *registered = pipe.execute()
    threads = [
        (queue, place, t.decode())
        for (queue, place), ts in zip(queues, registered, strict=True)
        for t in ts
    ]
    pipe = client.pipeline(transaction=False)
    for queue, place, thread in threads:
        pipe.llen(place.jobs_pending(queue, thread))
    held: dict[str, int] = {}
    for (_, _, thread), length in zip(threads, pipe.execute(), strict=True):
        worker = process_of(thread)
        held[worker] = held.get(worker, 0) + int(length)
    last = {w.decode(): int(t) for w, t in beats.items()}
    names = sorted(set(last) | {w for w, n in held.items() if n > 0})
    return [
        WorkerInfo(
            worker=name,
            last_heartbeat=last.get(name),
            heartbeat_age_ms=max(0, now - last[name]) if name in last else None,
            alive=name in last and now - last[name] < dead_after_ms,
            jobs_in_flight=held.get(name, 0),
        )
        for name in names
    ]
