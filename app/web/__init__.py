"""The HTTP side: the Flask app (create_app, from app/web/factory.py) and the gunicorn
server around it (app/web/server.py, app/web/worker.py).

create_app is loaded on first use, not with the package: `busbar web` imports
app.web.main first, and with the gevent worker class it must patch the standard library
before Flask, redis and ssl are imported (gevent's own rule: patch first).

Modules (docs/layout.md is the whole map; spec/test_map.py keeps both true):

    attempts.py         the attempt log over HTTP
    auth.py             HTTP Basic, the token as username
    body.py             JSON request bodies, read strictly
    chunked.py          a chunked request body, decoded strictly
    console.py          GET /console; console_assets/ holds its page, style and ES modules
    context.py          what a request handler needs, built once per process
    deadletters.py      dead letters over HTTP
    deadlines.py        the header and body deadlines of web's connections
    delivered.py        a subscriber's last delivered event over HTTP
    destinations.py     GET /destination-types: the brokers a destination may name
    durability.py       a change answered only once its replicas hold it
    erasures.py         /erasures: erase an entity's events, the receipts
    errors.py           every error as JSON, never a stack trace
    factory.py          create_app(): settings, Redis and blueprints
    filters.py          POST /filters/test: a content filter tried on events
    health.py           /health and /pulse
    main.py             `busbar web`
    metrics.py          GET /metrics in the Prometheus text format
    monitoring.py       /workers, /history and /replays
    openapi/            GET /openapi.json, from the models' field rules
    pausing.py          pause and resume over HTTP
    push_keys.py        GET /.well-known/jwks.json and root's key rotation
    publish.py          POST /topics/<name>, answered before Flask (the hot path)
    request_headers.py  a request's head, read strictly in one pass
    responses.py        headers every response gets
    retention.py        /topics/<name>/retention: how long its payloads are kept
    schemas.py          /topics/<name>/schemas over HTTP
    secrets.py          signing secrets over HTTP
    server.py           gunicorn serving create_app(), configured from Settings
    subscriptions.py    /subscription(s) and /subscriber(s)
    throttle.py         failed logins throttled per address
    tokens.py           /api_tokens
    topics.py           /topics: publish, list, delete
    transforms.py       POST /transforms/test: a transform tried on an event
    turns.py            a long answer takes turns with the requests beside it
    trial.py            POST /subscription/test and root's by name
    worker.py           the gunicorn worker class: gevent's server, strict framing
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from app.web.factory import create_app

        return create_app
    raise AttributeError(f"module 'app.web' has no attribute {name!r}")
