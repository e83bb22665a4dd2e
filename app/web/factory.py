"""The Flask application: create_app() wires settings, Redis and blueprints together."""

from __future__ import annotations

import redis
from flask import Flask
from flask.json.provider import DefaultJSONProvider

from app.redis_client import connect
from app.tracing import NO_TRACING, Tracing
from app.web import (
    attempts,
    body,
    console,
    deadletters,
    delivered,
    destinations,
    durability,
    erasures,
    errors,
    filters,
    health,
    metrics,
    monitoring,
    openapi,
    pausing,
    push_keys,
    responses,
    retention,
    schemas,
    secrets,
    subscriptions,
    throttle,
    tokens,
    topics,
    transforms,
    trial,
)
from app.web.context import EXTENSION, WebContext
from app.web.publish import FastPublish
from config.settings import Settings


def create_app(
    settings: Settings, client: redis.Redis | None = None, tracing: Tracing = NO_TRACING
) -> Flask:
    """`tracing`: `busbar web` passes app/tracing.py's from_env(); tests pass theirs."""
    app = Flask("busbar", static_folder=None)  # an API: no unauthenticated file serving
    body.limit_bodies(app, settings.max_body_bytes)
    if settings.web_worker_class == "gthread":
        body.frame_bodies_under_gthread(app)
    if isinstance(app.json, DefaultJSONProvider):  # Flask's own, always, unless replaced
        app.json.sort_keys = False
        app.json.compact = True
    app.url_map.strict_slashes = False
    ctx = WebContext.build(settings, client or connect(settings), tracing)
    app.extensions[EXTENSION] = ctx
    errors.install(app)
    responses.install(app)
    durability.install(app, settings.redis_min_replicas)
    blueprints = (
        health, tokens, topics, subscriptions, deadletters, attempts, pausing, metrics, openapi,
    )  # fmt: skip
    for module in (
        *blueprints, monitoring, console, secrets, push_keys, trial, filters, schemas,
        erasures, retention, transforms, delivered, destinations,
    ):  # fmt: skip
        app.register_blueprint(module.blueprint)
    logins = throttle.FailedLogins(settings.auth_failures_per_minute)
    throttle.install(app, logins)
    app.wsgi_app = FastPublish(app.wsgi_app, ctx, logins)  # type: ignore[method-assign]  # Flask's way to add WSGI middleware
    return app
