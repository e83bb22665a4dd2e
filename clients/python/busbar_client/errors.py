"""What the client raises: one base class, one subclass per answer a caller handles
differently, each carrying the server's own message (its `{"error": ...}`)."""

from __future__ import annotations


class BusbarError(Exception):
    """Base of every error of this package; `status` is the HTTP status, None when the
    bus gave no answer at all."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message if status is None else f"{status}: {message}")
        self.message = message
        self.status = status


class BadRequest(BusbarError):
    """400: the bus refused the input; the message names the field."""


class Unauthorized(BusbarError):
    """401: no token, or one the bus does not know."""


class Forbidden(BusbarError):
    """403: a known token that may not do this (a client on a root endpoint, another
    client's topic)."""


class NotFound(BusbarError):
    """404: no such topic, subscription or client name."""


class Conflict(BusbarError):
    """409: contradicts what exists (a token held by another name, a shared name)."""


class PayloadTooLarge(BusbarError):
    """413: the body is over the bus's BUSBAR_MAX_BODY_BYTES; publish smaller arrays."""


class TooManyRequests(BusbarError):
    """429: the publisher is over the bus's BUSBAR_PUBLISH_RATE (or its address failed
    too many logins); nothing was written. Retried after Retry-After before raised."""


class Unavailable(BusbarError):
    """503: the bus cannot reach Redis, or is busy; retried with backoff before raised."""


class ServerError(BusbarError):
    """Any other answer the bus should not give."""


class ConnectionFailed(BusbarError):
    """No answer: connection refused, reset, or timed out (retried before raised, where
    a retry is safe)."""


BY_STATUS: dict[int, type[BusbarError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    429: TooManyRequests,
    503: Unavailable,
}


def for_status(status: int, message: str) -> BusbarError:
    return BY_STATUS.get(status, ServerError)(message, status)
