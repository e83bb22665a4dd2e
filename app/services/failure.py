"""Why a callback gave no HTTP answer, in the words an operator searches logs for.

The reason is stored as a dead letter's `last_status` and logged with the client's name
and the callback's host, so it must be short, stable and free of anything secret: the
exception's own text can hold the full URL (userinfo included) and is never used.
"""

from __future__ import annotations

import http.client
import socket
import ssl

from app.errors import BadAnswer, Disconnected

TIMEOUT = "timeout"
DNS_FAILURE = "dns_failure"
CONNECTION_REFUSED = "connection_refused"
TLS_ERROR = "tls_error"
CONNECTION_ERROR = "connection_error"
BAD_ANSWER = "bad_answer"


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception, its causes and contexts, the exceptions it carries in its args,
    and a `reason` it holds (as an SSL error's library wraps one)."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.append(current)
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
        todo += [a for a in current.args if isinstance(a, BaseException)]
        inner = getattr(current, "reason", None)
        if isinstance(inner, BaseException):
            todo.append(inner)
    return seen


def reason(exc: BaseException) -> str:
    """What stopped a callback request (the engine's client, http.client, ssl and socket
    errors)."""
    chain = _chain(exc)
    if any(isinstance(e, TimeoutError) for e in chain):
        return TIMEOUT
    if any(isinstance(e, ssl.SSLError) for e in chain):
        return TLS_ERROR
    if any(isinstance(e, socket.gaierror) for e in chain):
        return DNS_FAILURE
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return CONNECTION_REFUSED
    if any(isinstance(e, BadAnswer) for e in chain):
        return BAD_ANSWER
    if any(isinstance(e, OSError | http.client.HTTPException | Disconnected) for e in chain):
        return CONNECTION_ERROR
    return type(exc).__name__
