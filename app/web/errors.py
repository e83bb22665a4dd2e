"""Every error leaves as JSON `{"error": "..."}`: never an HTML page, never a stack trace.

Deliberate errors map by class; HTTP errors raised by Flask/Werkzeug (404, 405, 413) keep
their status and headers; Redis outages, refused writes and a Redis busy with a long
script are 503 so clients retry and load balancers back off; anything else is logged
with its traceback and answered with a bare 500.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import redis
from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

from app import errors

log = logging.getLogger(__name__)

STATUS: dict[type[errors.BusbarError], int] = {
    errors.InvalidInput: 400,
    errors.Unauthorized: 401,
    errors.Forbidden: 403,
    errors.NotFound: 404,
    errors.Conflict: 409,
    errors.PayloadTooLarge: 413,
    errors.Unprocessable: 422,
    errors.RateLimited: 429,
    errors.NotReplicated: 503,
    errors.Busy: 503,
}


def error_response(status: int, message: str) -> Response:
    response = jsonify(error=message)
    response.status_code = status
    return response


def _busbar_error(exc: errors.BusbarError) -> Response:
    status = next((code for cls, code in STATUS.items() if isinstance(exc, cls)), 500)
    if isinstance(exc, errors.BadFraming):  # a chunked body that cannot be framed
        response = error_response(exc.status, f"request refused: {exc.message}")
        response.headers["Connection"] = "close"  # the rest of the stream is out of step
        return response
    response = error_response(status, exc.message)
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Basic realm="busbar"'
    if isinstance(exc, errors.RetryableError):
        response.headers["Retry-After"] = str(max(1, -(-exc.delay_ms // 1000)))
    return response


def _http_error(exc: HTTPException) -> Response:
    messages = {
        404: "no such endpoint",
        405: "method not allowed on this endpoint",
        413: "request body too large",
    }
    code = exc.code or 500
    response = error_response(code, messages.get(code, exc.description or exc.name))
    for name, value in exc.get_headers():
        if name in ("Allow", "Retry-After"):
            response.headers[name] = value
    return response


def _redis_down(exc: redis.RedisError) -> Response:
    """Redis unreachable (a restart, a master dying before its replica takes over): the
    client may retry shortly; Retry-After says when."""
    log.warning("redis unavailable: %s", exc)
    response = error_response(503, "Redis is unavailable")
    response.headers["Retry-After"] = "1"
    return response


def _redis_refuses_writes(exc: redis.RedisError) -> Response:
    """Redis at its maxmemory, or a replica after failover: nothing was written (a script
    fails on its first write), so the client may retry; 503 says so, 500 would not."""
    log.warning("redis refuses writes: %s", exc)
    response = error_response(503, "Redis refuses writes (out of memory or read-only); retry")
    response.headers["Retry-After"] = "1"
    return response


# Redis turning busbar away, not failing a command: protected mode (a server with no
# password reached from another host, as a Valkey pod is by web's), a password or an ACL
# that does not let busbar in. Nothing was written; it lasts until the operator acts.
TURNED_AWAY = ("DENIED", "NOAUTH", "NOPERM", "WRONGPASS")


def _redis_refuses(exc: redis.ResponseError) -> Response:
    """BUSY: another client's script has run past Redis's busy threshold, and Redis
    answers nothing else until it ends; nothing of this request was written. Or Redis
    turns busbar away (TURNED_AWAY): a 503 naming Redis's reason, logged as an error
    for the operator, never a 500."""
    text = str(exc)
    if text.startswith("BUSY"):
        log.warning("redis busy: %s", exc)
        response = error_response(503, "Redis is busy running a script; retry")
        response.headers["Retry-After"] = "1"
        return response
    if text.startswith(TURNED_AWAY):
        log.error("redis turns busbar away: %s", text[:300])
        reason = text.split(" ", 1)[0]
        response = error_response(
            503,
            f"Redis turns busbar away ({reason}): the operator must check BUSBAR_REDIS_URL "
            "and the server's protected mode, password and ACL",
        )
        response.headers["Retry-After"] = "10"
        return response
    return _unexpected(exc)


def _unexpected(_exc: Exception) -> Response:
    """Flask hands the exception over; log.exception finds it where it is handled."""
    log.exception("unhandled error")
    return error_response(500, "internal error")


# most specific first: answer() takes the first that matches, as Flask's lookup does
HANDLERS: list[tuple[type[Exception], Callable[[Any], Response]]] = [
    (errors.BusbarError, _busbar_error),
    (HTTPException, _http_error),
    (redis.ConnectionError, _redis_down),
    (redis.TimeoutError, _redis_down),
    (redis.exceptions.OutOfMemoryError, _redis_refuses_writes),
    (redis.exceptions.ReadOnlyError, _redis_refuses_writes),
    (redis.ResponseError, _redis_refuses),
    (Exception, _unexpected),
]


def answer(exc: Exception) -> Response:
    """What the handlers answer `exc`, for code that runs after the view (an
    after_request hook), where Flask no longer hands errors to them."""
    return next(handler(exc) for kind, handler in HANDLERS if isinstance(exc, kind))


def install(app: Flask) -> None:
    for kind, handler in HANDLERS:
        app.register_error_handler(kind, handler)
