"""The job scripts' KEYS and ARGV (job_push, job_promote, job_settle, job_scrub,
job_scrub_many, job_take), each built in one place: the queue's own steps
(app/models/queue.py) and the engine's (app/delivery/room.py) make the same calls.
spec/app/models/test_job_calls.py checks each builder against its script's header."""

from __future__ import annotations

from collections.abc import Sequence

from app.lua.call import Call
from app.models.keys import MAIN, Place

SCRUB_CHUNK = 500  # holders per job_scrub_many call: a bounded script, few round trips
# the attempt log's bounds (app/models/attempts.py's kept): attempts kept per subscriber,
# the oldest kept (ms), the shard attempt stream's MAXLEN
Kept = tuple[int, int, int]
NOT_KEPT: Kept = (0, 0, 0)


def push(place: Place, queue: str, job: bytes, due: int, now: int) -> Call:
    return Call("job_push", place.job_states(queue), [job, due, now])


def promote(places: Sequence[tuple[Place, str]], now: int, limit: int) -> Call:
    """Every place's scheduled set and instant list, in pairs."""
    keys = [key for p, q in places for key in (p.jobs_scheduled(q), p.jobs_instant(q))]
    return Call("job_promote", keys, [now, limit])


def settle(place: Place, queue: str, worker: str, job: bytes, at: int | None, now: int) -> Call:
    """Acknowledge the job (at None) or give it back to run at `at` (a nack)."""
    keys = [*place.job_states(queue), place.jobs_pending(queue, worker)]
    return Call("job_settle", keys, [job, -1 if at is None else at, now])


def scrub(
    place: Place, queue: str, holder: str, process: str, silence_ms: int, forget: bool
) -> Call:
    keys = [
        place.jobs_pending(queue, holder),
        place.jobs_instant(queue),
        place.jobs_pending_index(queue),
        place.workers,
    ]
    return Call("job_scrub", keys, [holder, process, silence_ms, "1" if forget else "0"])


def scrub_many(
    place: Place,
    queue: str,
    process: str,
    holders: Sequence[str],
    silence_ms: int,
    forget: bool,
    kept: Kept = NOT_KEPT,
) -> list[Call]:
    """The calls that scrub `holders`, SCRUB_CHUNK to a call. On queue main, a delivery
    cut short is counted as `abandoned` on its subscriber, and with `kept`, recorded in
    its attempt log."""
    head = [place.jobs_instant(queue), place.jobs_pending_index(queue), place.workers]
    base = place.base if queue == MAIN else ""
    found = []
    for at in range(0, len(holders), SCRUB_CHUNK):
        chunk = list(holders[at : at + SCRUB_CHUNK])
        keys = head + [place.jobs_pending(queue, h) for h in chunk]
        args: list[object] = [process, silence_ms, "1" if forget else "0", base, *kept, *chunk]
        found.append(Call("job_scrub_many", keys, args))
    return found


def sweep_keys(places: Sequence[tuple[Place, str]], worker: str) -> list[str]:
    """What a sweep script (job_take, deliver_take) names per queue: its instant list,
    `worker`'s pending list there, and its pending index."""
    keys = []
    for p, q in places:
        keys += [p.jobs_instant(q), p.jobs_pending(q, worker), p.jobs_pending_index(q)]
    return keys


def take(places: Sequence[tuple[Place, str]], worker: str) -> Call:
    return Call("job_take", sweep_keys(places, worker), [worker])
