"""What the delivery scripts answer, read in one place for both clients."""

from __future__ import annotations

import logging
from typing import Any

from app import codec
from app.delivery.flight import Flight, Outcome, Taken, begun
from app.errors import JobLost
from app.models.queue import JobQueue

log = logging.getLogger(__name__)


def taken(
    group: list[JobQueue],
    worker: str,
    nonce: str,
    found: list[Any],
    issued: float,
    confirmed: bool = True,
) -> Taken:
    """A sweep's find ({place, job, begin reply, left}) as a Taken; `issued`, when the
    sweep's script was sent (Flight.issued); `confirmed`, as flight.begun's."""
    place, job, reply, left = found
    queue = group[int(place) - 1]
    if reply[0] == b"lost":
        raise JobLost("deliver_take: the job is no longer held by this worker")
    flight = None
    if reply[0] != b"run":
        flight = begun(codec.unpack_job(job)[1][0], worker, job, nonce, reply, issued, confirmed)
    return Taken(queue, job, flight, int(left))


def checked(script: str, reply: list[Any]) -> list[Any]:
    if reply[0] == b"lost":
        raise JobLost(f"{script}: the delivery job is no longer held by this worker")
    return reply


def finished(
    flight: Flight,
    status: str,
    done: str,
    reply: list[Any],
    nonce: str,
    group: list[JobQueue],
    issued: float,
    confirmed: bool = True,
) -> tuple[Outcome, Flight | Outcome | None]:
    """An ack's or fail's reply as (outcome, the next flight or what the job did when the
    ack went on with the subscriber), with Outcome.taken when the ack's sweep took one.
    `done`: what the step was when it settled (delivered, failed or deferred)."""
    after: Flight | Outcome | None = None
    took = None
    if reply[0] == b"next":
        after = begun(flight.token, flight.worker, flight.job, nonce, reply[1], issued, confirmed)
        reply = [b"done"]
    elif reply[0] == b"done" and len(reply) > 2 and done == "delivered":
        took = taken(group, flight.worker, nonce, reply[2:], issued, confirmed)
    kind = reply[0].decode()
    if kind == "stale":
        log.warning(
            "answer from %s for batch %s of %s came after its delivery was superseded",
            flight.host, flight.batch_id.decode(), flight.client,
        )  # fmt: skip
    if kind == "done":
        kind = done
    return Outcome(kind, len(flight.entries), status, took), after


def lost_answer(flight: Flight, status: str) -> JobLost:
    return JobLost(
        f"answer {status} of {flight.client} at {flight.host} not recorded: the job was "
        "taken over while this worker was paused or cut off from Redis"
    )
