"""BUSBAR_REDIS_MIN_REPLICAS for the Flask views: a change is answered only once the
replicas it asks for hold it (app/models/replicas.py). The fast publish path waits by
itself before its 204 (app/web/publish.py); this hook covers every other view that
writes: tokens, subscriptions, deletions, rotations, replays, a chunked publish.

Only a write's success waits: a request refused with a 4xx wrote nothing, and reads
(GET, HEAD) are answered at once. A write short of replicas in time is answered 503
with Retry-After instead of its success; what it wrote stays written (a repeat of a
create or a subscribe is idempotent; a publish with its Idempotency-Key queues nothing
twice)."""

from __future__ import annotations

from flask import Flask, Response, request

from app.web.context import web_context
from app.web.errors import answer

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _confirmed(response: Response) -> Response:
    if request.method not in WRITES or response.status_code >= 400:
        return response
    try:
        web_context().replicas.confirm()
    except Exception as exc:  # answered as the error handlers answer it: 503s
        return answer(exc)
    return response


def install(app: Flask, min_replicas: int) -> None:
    if min_replicas > 0:
        app.after_request(_confirmed)
