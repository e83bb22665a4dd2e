"""One hierarchy for every failure busbar raises on purpose.

The web layer maps these classes to HTTP statuses and the worker maps them to ack/nack
decisions, so domain code never needs to know about either.
"""

from __future__ import annotations


class BusbarError(Exception):
    """Base of every error busbar raises deliberately; its message is safe to show users."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(BusbarError):
    """The caller sent something we refuse (HTTP 400)."""


class PayloadTooLarge(BusbarError):
    """The request body is over BUSBAR_MAX_BODY_BYTES; refused before it is read (HTTP 413)."""


class CallbackRefused(BusbarError):
    """A callback connection reached an address busbar must not call (a failed delivery)."""


class BadAnswer(BusbarError):
    """A callback answered with something that is not HTTP/1.x (a failed delivery)."""


class BadFraming(BusbarError):
    """An HTTP message whose framing is ambiguous or broken (app/framing.py): a request is
    answered `status` (400, or 501 for a transfer coding busbar does not implement) and
    its connection closed; a callback's answer is a BadAnswer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Disconnected(BusbarError):
    """A callback's connection closed before its answer (a failed delivery). `stale`: it
    was a kept-alive connection, closed before a byte of the answer came, so the request
    may be sent again on a new one (app/delivery/callback.py)."""

    stale = False


class Unauthorized(BusbarError):
    """No credentials, or credentials we do not know (HTTP 401)."""


class Forbidden(BusbarError):
    """Known credentials that may not do this (HTTP 403)."""


class NotFound(BusbarError):
    """The named thing does not exist (HTTP 404)."""


class Conflict(BusbarError):
    """The request contradicts what is already stored (HTTP 409)."""


class Unprocessable(BusbarError):
    """Well-formed, but it cannot be done as asked: an Idempotency-Key reused with another
    body (HTTP 422, as the IETF Idempotency-Key draft recommends)."""


class RetryableError(BusbarError):
    """A failure worth trying again later; carries how long to wait before the retry."""

    def __init__(self, message: str, delay_ms: int) -> None:
        super().__init__(message)
        self.delay_ms = delay_ms


class RateLimited(RetryableError):
    """A publisher over BUSBAR_PUBLISH_RATE (HTTP 429, Retry-After: the delay)."""


class NotReplicated(RetryableError):
    """A write done on the master that fewer replicas than BUSBAR_REDIS_MIN_REPLICAS
    confirmed in time (HTTP 503, Retry-After). It is not undone: a publish sent again
    with its Idempotency-Key queues nothing twice."""


class Busy(RetryableError):
    """A request that met a change it could not settle in a few tries (a topic's content
    filters changing under a publish), with nothing written: retry (HTTP 503)."""


class OriginBusy(RetryableError):
    """A delivery not sent because its callback's origin had no connection for it in
    time (BUSBAR_ORIGIN_CONNECTIONS, BUSBAR_ORIGIN_CONNECTING), or refused a new one
    while others to it were open and answering: the origin is busy, not down. Held back
    like a Retry-After (no attempt counted, nothing lost), not failed."""


class OutOfFiles(OriginBusy):
    """A connect that found the worker out of descriptors (EMFILE) with no kept-alive
    connection left to close for it: held back at once, not failed (the shortage is
    the worker's, not the subscriber's), and not waited out in its origin's line, where
    nothing is released for it."""


class SlowLaneSpent(RetryableError):
    """A batch whose transforms are in the slow lane (they ran out of time lately) while
    the lane has spent its share of a core (BUSBAR_TRANSFORM_SLOW_MS): held back like a
    Retry-After (no attempt counted, nothing lost), not failed."""


class JobLost(BusbarError):
    """A worker asked to move a job it no longer holds: it was taken for dead (paused,
    cut off from Redis) and scrubbed, and another worker may hold the job now. Nothing
    changed; the worker recovers its own pending list and moves on."""
