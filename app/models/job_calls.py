"""The job scripts' KEYS and ARGV and their replies (job_push, job_promote, job_settle,
job_scrub, job_scrub_many, job_take, and the worker liveness scripts heartbeat and
worker_forget), each built in one place: the queue's own steps (app/models/queue.py)
and the engine's (app/delivery/room.py) make the same calls.
spec/app/models/test_job_calls.py checks each builder against its script's header."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from app.lua.call import Call, as_bool, as_int
from app.models.keys import MAIN, Place

SCRUB_CHUNK = 500  # holders per job_scrub_many call: a bounded script, few round trips
# the attempt log's bounds (app/models/attempts.py's kept): attempts kept per subscriber,
# the oldest kept (ms), the shard attempt stream's MAXLEN
Kept = tuple[int, int, int]
NOT_KEPT: Kept = (0, 0, 0)


def push(place: Place, queue: str, job: bytes, due: int, now: int) -> Call[bool]:
    """Reads True when pushed, False when the job already existed."""
    return Call("job_push", place.job_states(queue), [job, due, now], as_bool)


class Promoted(NamedTuple):
    moved: int
    next_at: int | None  # the earliest due time of a job still scheduled


def _promoted(reply: Any) -> Promoted:
    moved, next_at = reply
    return Promoted(int(moved), None if next_at == -1 else int(next_at))


def promote(places: Sequence[tuple[Place, str]], now: int, limit: int) -> Call[Promoted]:
    """Every place's scheduled set and instant list, in pairs."""
    keys = [key for p, q in places for key in (p.jobs_scheduled(q), p.jobs_instant(q))]
    return Call("job_promote", keys, [now, limit], _promoted)


def settle(
    place: Place, queue: str, worker: str, job: bytes, at: int | None, now: int
) -> Call[bool]:
    """Acknowledge the job (at None) or give it back to run at `at` (a nack). Reads False
    when the worker no longer held it (it was scrubbed meanwhile)."""
    keys = [*place.job_states(queue), place.jobs_pending(queue, worker)]
    return Call("job_settle", keys, [job, -1 if at is None else at, now], as_bool)


def scrub(
    place: Place, queue: str, holder: str, process: str, silence_ms: int, forget: bool
) -> Call[int]:
    """Reads the number of jobs given back, or -1 when the process is alive."""
    keys = [
        place.jobs_pending(queue, holder),
        place.jobs_instant(queue),
        place.jobs_pending_index(queue),
        place.workers,
    ]
    return Call("job_scrub", keys, [holder, process, silence_ms, "1" if forget else "0"], as_int)


def scrub_many(
    place: Place,
    queue: str,
    process: str,
    holders: Sequence[str],
    silence_ms: int,
    forget: bool,
    kept: Kept = NOT_KEPT,
) -> list[Call[int]]:
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
        found.append(Call("job_scrub_many", keys, args, as_int))
    return found


def sweep_keys(places: Sequence[tuple[Place, str]], worker: str) -> list[str]:
    """What a sweep script (job_take, deliver_take) names per queue: its instant list,
    `worker`'s pending list there, and its pending index."""
    keys = []
    for p, q in places:
        keys += [p.jobs_instant(q), p.jobs_pending(q, worker), p.jobs_pending_index(q)]
    return keys


class Took(NamedTuple):
    at: int  # the place's index in the call's list
    job: bytes


def _took(reply: Any) -> Took | None:
    return Took(int(reply[0]) - 1, reply[1]) if reply else None


def take(places: Sequence[tuple[Place, str]], worker: str) -> Call[Took | None]:
    return Call("job_take", sweep_keys(places, worker), [worker], _took)


def heartbeat(place: Place, process: str) -> Call[int]:
    """Reads the time written (ms, Redis's clock)."""
    return Call("heartbeat", [place.workers], [process], as_int)


def forget_worker(place: Place, process: str, silence_ms: int) -> Call[bool]:
    """Reads True when the process was forgotten, False when it is alive."""
    return Call("worker_forget", [place.workers], [process, silence_ms], as_bool)
