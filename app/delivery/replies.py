"""What the delivery scripts answer, read in one place."""

from __future__ import annotations

import logging

from app import codec
from app.delivery.flight import Finished, Flight, Outcome, Taken, begun
from app.delivery.tags import Found, Kind, Settled, Tag
from app.errors import JobLost
from app.models.queue import Located

log = logging.getLogger(__name__)


def taken(
    group: list[Located],
    worker: str,
    nonce: str,
    found: Found,
    issued: float,
    confirmed: bool = True,
) -> Taken:
    """A sweep's find as a Taken; `issued`, when the sweep's script was sent
    (Flight.issued); `confirmed`, as flight.begun's."""
    queue = group[found.at]
    flight = None
    if found.begin is not None:
        pid = codec.unpack_job(found.job)[1][0]
        flight = begun(pid, worker, found.job, nonce, found.begin, issued, confirmed)
    return Taken(queue, found.job, flight, found.left)


def settled(
    flight: Flight,
    status: str,
    done: Kind,
    reply: Settled,
    nonce: str,
    group: list[Located],
    issued: float,
    confirmed: bool = True,
) -> Finished:
    """An ack's or fail's reply as (outcome, the next flight or what the job did when the
    ack went on with the subscriber), with Outcome.taken when the ack's sweep took one.
    `done`: what the step was when it settled (delivered, failed or deferred)."""
    after: Flight | Outcome | None = None
    took = None
    kind = Kind.STALE if reply.tag is Tag.STALE else Kind.GONE
    if reply.begin is not None:  # NEXT: settled, and the next batch begun
        after = begun(flight.pid, flight.worker, flight.job, nonce, reply.begin, issued, confirmed)
        kind = done
    elif reply.tag is Tag.DONE:
        kind = done
        if reply.found is not None and done is Kind.DELIVERED:
            took = taken(group, flight.worker, nonce, reply.found, issued, confirmed)
    if kind is Kind.STALE:
        log.warning(
            "answer from %s for batch %s of %s came after its delivery was superseded",
            flight.host, flight.batch_id.decode(), flight.client,
        )  # fmt: skip
    return Finished(Outcome(kind, len(flight.every_entry), status, took), after)


def lost_answer(flight: Flight, status: str) -> JobLost:
    return JobLost(
        f"answer {status} of {flight.client} at {flight.host} not recorded: the job was "
        "taken over while this worker was paused or cut off from Redis"
    )
