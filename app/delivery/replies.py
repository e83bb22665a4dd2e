"""What the delivery scripts answer, read in one place for both clients."""

from __future__ import annotations

import logging

from app import codec
from app.delivery.flight import Flight, Outcome, begun
from app.errors import JobLost
from app.models.queue import JobQueue

log = logging.getLogger(__name__)
# a job a sweep took: its queue, the job, and its delivery when the take began one
Taken = tuple[JobQueue, bytes, Flight | Outcome | None]


def taken(group: list[JobQueue], worker: str, nonce: str, found: list) -> Taken:
    """A sweep's find ({place, job, begin reply}) as (queue, job, flight or outcome);
    None third for a job that is not a delivery."""
    place, job, reply = found
    queue = group[int(place) - 1]
    if reply[0] == b"run":
        return queue, job, None
    if reply[0] == b"lost":
        raise JobLost("deliver_take: the job is no longer held by this worker")
    token = codec.unpack_job(job)[1][0]
    return queue, job, begun(token, worker, job, nonce, reply)


def checked(script: str, reply: list) -> list:
    if reply[0] == b"lost":
        raise JobLost(f"{script}: the delivery job is no longer held by this worker")
    return reply


def finished(
    flight: Flight,
    status: str,
    ok: bool,
    reply: list,
    nonce: str,
    group: list[JobQueue],
) -> tuple[Outcome, Flight | Outcome | None]:
    """An ack's or fail's reply as (outcome, the next flight or what the job did when the
    ack went on with the subscriber), with Outcome.taken when the ack's sweep took one."""
    after: Flight | Outcome | None = None
    took = None
    if reply[0] == b"next":
        after = begun(flight.token, flight.worker, flight.job, nonce, reply[1])
        reply = [b"done"]
    elif reply[0] == b"done" and len(reply) > 2:
        took = taken(group, flight.worker, nonce, reply[2:])
    kind = reply[0].decode()
    if kind == "stale":
        log.warning(
            "answer from %s for batch %s of %s came after its delivery was superseded",
            flight.host, flight.batch_id.decode(), flight.client,
        )  # fmt: skip
    if kind == "done":
        kind = "delivered" if ok else "failed"
    return Outcome(kind, len(flight.entries), status, took), after


def lost_answer(flight: Flight, status: str) -> JobLost:
    return JobLost(
        f"answer {status} of {flight.client} at {flight.host} not recorded: the job was "
        "taken over while this worker was paused or cut off from Redis"
    )
