"""POST /topics/<name>: one implementation, reached two ways.

Publishing is the hot path, and measured under wrk (docs/performance.md) Flask's share of
a single-event publish was as large as the rest of the work: the request context, URL
matching, the hooks, the Request and Response objects. So `FastPublish`, a WSGI
middleware around the Flask app, answers the common case itself: a POST to
/topics/<name> with a declared body within BUSBAR_MAX_BODY_BYTES whose publish
succeeds (204). Everything else goes to Flask, which has the last word on any error:

- a request the fast path does not take (no Content-Length, chunked, oversized, another
  method or path) goes to Flask untouched;
- a publish that fails goes to Flask with the exception in the WSGI environ, and the
  view raises it there, so the error passes through the same handlers (status, JSON
  message, WWW-Authenticate, Retry-After, logging) as every other error; the publish
  itself runs once, whichever way the request came in.

`publish()` is the one implementation: the Flask view calls it too (chunked bodies).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from werkzeug.datastructures import Authorization
from werkzeug.exceptions import ClientDisconnected

from app.clock import now_ms
from app.errors import Forbidden, InvalidInput
from app.models import event_ids, trace_context, validate
from app.models.event import parse_events
from app.models.keys import Place
from app.models.trace_context import TraceContext
from app.models.validate import digits
from app.services.operations import refuse_publish
from app.web.auth import claimed_client, require_known
from app.web.body import decode_json
from app.web.context import WebContext
from app.web.throttle import FailedLogins

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

# A body larger than this (or of unknown length) has its token checked before it is read
# and parsed: one round trip, against the 167-450 ms a 1 MiB parse cost an unknown
# token. Smaller ones are checked by the write itself, saving that round trip.
CHECK_FIRST_BYTES = 64 * 1024
FAILED = "busbar.publish_failed"  # environ key: the exception the fast path met
# What Flask's `/topics/<name>` matches with strict_slashes off: one non-empty segment.
_TOPIC_PATH = re.compile(r"/topics/([^/]+)/?")


class Held(NamedTuple):
    """A publish's events, and the places (catalog, shards) their queueing wrote to."""

    events: int
    places: tuple[Place, ...]


def publish(
    ctx: WebContext,
    name: str,
    auth: Authorization | None,
    idempotency_key: str | None,
    body: Callable[[], bytes],
    declared: int | None = None,
    trace: TraceContext | None = None,
) -> tuple[Place, ...]:
    """Validate, then queue in one round trip on a single Redis, the token checked inside
    the topic step. Order: credentials that cannot be a client's fail first (401/403),
    then the body is read; invalid input is a 400 only for a known token (401 beats
    400). `Idempotency-Key: <id>`: a repeat of the request within
    BUSBAR_PUBLISH_DEDUPE_S queues nothing twice (app/services/ingest.py). `trace`: the
    request's valid W3C trace context, kept with each event; with tracing on, the
    publish's span's is kept instead, a child of it (docs/tracing.md). Returns the places
    it wrote to, which a BUSBAR_REDIS_MIN_REPLICAS barrier covers before the 204."""
    tracing = ctx.tracing
    if not tracing.on:
        return _publish(ctx, name, auth, idempotency_key, body, declared, trace).places
    try:  # the span names its topic only once it is one (its name is not the caller's to pick)
        topic = validate.topic_name(name, "topic name")
    except InvalidInput:
        topic = ""
    span = tracing.publish(topic, trace)
    code, error, events = 0, "error", 0
    try:
        events, places = _publish(ctx, name, auth, idempotency_key, body, declared, span.context)
        code, error = 204, ""
    except Exception as exc:  # its class names what went wrong; its text stays out
        error = type(exc).__name__
        raise
    finally:
        span.end(code, error, events)
    return places


def _publish(
    ctx: WebContext,
    name: str,
    auth: Authorization | None,
    idempotency_key: str | None,
    body: Callable[[], bytes],
    declared: int | None,
    trace: TraceContext | None,
) -> Held:
    """publish(), without its span."""
    token = claimed_client(ctx, auth)
    if declared is None or declared > CHECK_FIRST_BYTES:
        require_known(ctx, token)  # an unknown token never costs a large body's parse
    settings = ctx.settings
    now = now_ms()
    try:
        topic = validate.topic_name(name, "topic name")
        refuse_publish(topic)
        publish_id = validate.publish_id(idempotency_key)
        raw = body()
        events = parse_events(
            decode_json(raw),
            now_ms=now,
            allow_http=settings.allow_http,
            max_data=settings.max_event_data,
            max_events=settings.max_publish_events,
        )
    except (InvalidInput, Forbidden):
        require_known(ctx, token)
        raise
    if not events:  # `[]`: no script runs, so the token is checked here
        require_known(ctx, token)
        return Held(0, ())
    if publish_id is not None:  # its events' ids for `event_ids` subscriptions
        events = [
            dataclasses.replace(e, event_id=event_ids.for_publish(topic, publish_id, i))
            for i, e in enumerate(events)
        ]
    # a repeat is the same request: the same body (its digest only when it matters)
    fingerprint = hashlib.sha256(raw).hexdigest()[:32] if publish_id is not None else ""
    queued = ctx.ingest.publish(topic, token, events, now, publish_id, fingerprint, trace)
    return Held(len(events), queued.places)


class FastPublish:
    """The WSGI middleware (module docstring); installed by create_app()."""

    def __init__(self, app: WSGIApplication, ctx: WebContext, logins: FailedLogins) -> None:
        self._app = app
        self._ctx = ctx
        self._limit = ctx.settings.max_body_bytes
        self._logins = logins

    def _declared_length(self, environ: WSGIEnvironment) -> int | None:
        """The body's declared length when the fast path can take it, else None."""
        declared = environ.get("CONTENT_LENGTH", "")
        if not digits(declared) or "HTTP_TRANSFER_ENCODING" in environ:
            return None
        length = int(declared)
        return length if length <= self._limit else None

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[Any]:
        if environ["REQUEST_METHOD"] != "POST":
            return self._app(environ, start_response)
        path = _TOPIC_PATH.fullmatch(environ.get("PATH_INFO", ""))
        length = self._declared_length(environ) if path else None
        if path is None or length is None or self._logins.wait_s(environ.get("REMOTE_ADDR", "")):
            return self._app(environ, start_response)  # Flask answers (a throttled one: 429)

        def body() -> bytes:
            raw: bytes = environ["wsgi.input"].read(length)
            if len(raw) < length:  # what Flask's stream says of a body cut short
                raise ClientDisconnected()
            return raw

        try:
            places = publish(
                self._ctx,
                path.group(1),
                Authorization.from_header(environ.get("HTTP_AUTHORIZATION")),
                environ.get("HTTP_IDEMPOTENCY_KEY"),
                body,
                length,
                trace_context.parse(
                    environ.get("HTTP_TRACEPARENT"), environ.get("HTTP_TRACESTATE")
                ),
            )
            self._ctx.replicas.confirm(places)  # BUSBAR_REDIS_MIN_REPLICAS: held before the 204
        except Exception as exc:  # Flask's handlers answer it (module docstring)
            environ[FAILED] = exc
            return self._app(environ, start_response)
        start_response("204 NO CONTENT", [])
        return []
