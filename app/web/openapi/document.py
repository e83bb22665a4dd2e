"""GET /openapi.json: the HTTP API as OpenAPI 3.0, built from the models' own field
definitions (app/models/fields.py), so request schemas are what the validators accept.

Response bodies are described here, beside the views that return them; the schemathesis
test in spec/integration/ checks every response against this document.
"""

from __future__ import annotations

import functools
from typing import Any

from flask import Blueprint, Response, jsonify

from app.models import subscriber_pages as pages
from app.models.attempt_result import OUTCOMES
from app.models.callback_policy import Policy
from app.models.event import EVENT
from app.models.fields import DATA_VALUE, Doc, Rules
from app.models.route import ROUTE
from app.models.subscription import SUBSCRIPTION
from app.models.tokens import TOKEN_REQUEST
from app.models.validate import PUBLISH_ID_PATTERN
from app.release import version
from app.web.context import web_context
from app.web.openapi.attempts import attempts_paths, attempts_schemas
from app.web.openapi.console import console_paths, console_schemas
from app.web.openapi.erasures import erasures_paths, erasures_schemas
from app.web.openapi.filters import filters_paths, filters_schemas
from app.web.openapi.parts import ANYONE, CLIENT, ROOT, obj, operation, ref
from app.web.openapi.schemas import schemas_paths, schemas_schemas
from app.web.openapi.secrets import secrets_paths, secrets_schemas
from app.web.openapi.transforms import transforms_paths, transforms_schemas

blueprint = Blueprint("openapi", __name__)


def with_idempotency_key(doc: Doc) -> Doc:
    """The optional header that makes a repeated publish queue nothing twice."""
    header = {
        "name": "Idempotency-Key",
        "in": "header",
        "required": False,
        "description": "the same publish again within BUSBAR_PUBLISH_DEDUPE_S queues nothing",
        "schema": {"type": "string", "pattern": f"^{PUBLISH_ID_PATTERN.pattern}$"},
    }
    return {**doc, "parameters": [*doc.get("parameters", []), header]}


def with_trace_context(doc: Doc) -> Doc:
    """W3C Trace Context: kept with the events and delivered with them (docs/tracing.md).
    No pattern: an invalid value is ignored, never refused."""
    headers = [
        {
            "name": name,
            "in": "header",
            "required": False,
            "description": description,
            "schema": {"type": "string"},
        }
        for name, description in (
            ("traceparent", "W3C traceparent, kept with each event and sent with its "
             "delivery; an invalid one is ignored"),
            ("tracestate", "W3C tracestate (at most 512 characters, 32 members), kept "
             "only beside a valid traceparent"),
        )
    ]  # fmt: skip
    return {**doc, "parameters": [*doc.get("parameters", []), *headers]}


def paths() -> dict[str, Doc]:
    array = {"type": "array"}
    published = {"oneOf": [ref("Event"), {**array, "items": ref("Event")}]}
    subscribe = operation(
        "subscribe (replaces the subscriber's routes)", CLIENT, {204: None}, (400, 413),
        body=ref("Subscription"),
    )  # fmt: skip
    listing = listing_operation()
    return {
        "/health": {"get": operation("liveness and version", ANYONE, {200: ref("Health")})},
        "/openapi.json": {"get": operation("this document", ANYONE, {200: {"type": "object"}})},
        "/pulse": {"get": operation("Redis answers", f"{CLIENT} or {ROOT}", {204: None})},
        "/pulse/scaling": {
            "get": operation("slow (1 s) when jobs back up", f"{CLIENT} or {ROOT}", {204: None})
        },
        "/metrics": {"get": metrics_operation()},
        "/api_tokens": {
            "get": operation(
                "list clients (204 when none)",
                ROOT,
                {200: {**array, "items": ref("Token")}, 204: None},
            ),
            "post": operation(
                "create a client (409 when its name is in use), or with `add` give the "
                "client of that name another token (404 when none has it)",
                ROOT,
                {201: ref("Token")},
                (400, 404, 409, 413),
                body=ref("TokenRequest"),
            ),
        },
        "/api_tokens/{token}": {
            "delete": operation(
                "delete a token: with the client and its subscription when it was the "
                "client's last",
                ROOT,
                {204: None},
                name="token",
            )
        },
        "/api_tokens/by_name/{name}": {
            "delete": operation(
                "delete the one client of that name, every token of it and its subscription "
                "(no token in the URL)",
                ROOT,
                {204: None},
                (404, 409),
                name="name",
            )
        },
        "/topics": {"get": topics_operation()},
        "/topics/{name}": {
            "post": with_trace_context(
                with_idempotency_key(
                    operation(
                        "publish one event or an array (all or nothing)",
                        CLIENT,
                        {204: None},
                        (400, 413, 422),
                        body=published,
                        name="name",
                    )
                )
            ),
            "delete": operation(
                "delete a topic (its publisher or root)",
                f"{CLIENT} or {ROOT}",
                {204: None},
                (400, 404),
                name="name",
            ),
        },
        "/subscription": {"post": subscribe},
        "/subscriber": {
            "post": subscribe,
            "delete": operation("unsubscribe, dropping queued events", CLIENT, {204: None}, (404,)),
        },
        "/subscriptions": {"get": listing},
        "/subscribers": {"get": listing},
        "/subscriber/topics/{name}": {
            "delete": operation(
                "stop taking one topic", CLIENT, {204: None}, (400, 404), name="name"
            )
        },
        "/subscriber/deadletters": {
            "get": operation(
                "dead letters, oldest first",
                CLIENT,
                {200: {**array, "items": ref("DeadLetter")}},
                (404,),
            ),
            "delete": operation("forget dead letters", CLIENT, {204: None}, (404,)),
        },
        "/subscriber/deadletters/replay": {
            "post": operation(
                "requeue dead letters in order and lanes", CLIENT, {202: ref("Replayed")}, (404,)
            ),
        },
        "/destination-types": {
            "get": operation(
                "the brokers a subscription's destination may name, with their fields",
                f"{CLIENT} or {ROOT}",
                {200: ref("DestinationTypes")},
            ),
        },
        **console_paths(),
        **secrets_paths(),
        **filters_paths(),
        **transforms_paths(),
        **schemas_paths(),
        **attempts_paths(),
        **erasures_paths(),
    }


def listing_operation() -> Doc:
    """GET /subscriptions: every entry without a parameter (Routemaster's), else a page
    (app/models/subscriber_pages.py)."""
    doc = operation(
        "subscriptions (a client sees its own; root sees all), by client name",
        f"{CLIENT} or {ROOT}", {200: {"type": "array", "items": ref("SubscriptionInfo")}},
        (400,),
    )  # fmt: skip
    doc["parameters"] = [
        {"name": "limit", "in": "query", "required": False,
         "schema": {"type": "integer", "minimum": 1, "maximum": pages.MOST},
         "description": "a page of at most this many (absent, with no `after`: all)"},
        {"name": "after", "in": "query", "required": False,
         "schema": {"type": "string", "pattern": pages.CURSOR_PATTERN},
         "description": "the cursor of the `Link` header's rel=next of the page before"},
    ]  # fmt: skip
    doc["responses"]["200"]["headers"] = {
        "Link": {"description": 'of a page with more after it: `<...>; rel="next"`',
                 "schema": {"type": "string"}},
    }  # fmt: skip
    return doc


def lane_figures() -> Doc:
    """A lane of GET /subscriptions; `estimated` (true) only where its events were
    estimated: a subscriber of more than WALKED batches (app/models/subscribers.py)."""
    integer: Doc = {"type": "integer"}
    lane = obj({"lane": integer, "batches": integer, "events": integer, "oldest": integer})
    return {**lane, "properties": {**lane["properties"], "estimated": {"type": "boolean"}}}


def topics_operation() -> Doc:
    doc = operation("topics", f"{CLIENT} or {ROOT}", {200: topics_listing()}, (400,))
    mine = {"type": "string", "enum": ["true", "false"], "default": "false"}
    doc["parameters"] = [
        {"name": "mine", "in": "query", "required": False, "schema": mine,
         "description": "true: a client's own topics (it publishes or subscribes to them)"}
    ]  # fmt: skip
    return doc


def metrics_operation() -> Doc:
    doc = operation("Prometheus text", ROOT, {})
    doc["responses"]["200"] = {
        "description": "Prometheus text exposition format",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
    return doc


def topics_listing() -> Doc:
    topic = {
        "type": "object",
        "required": ["name", "publisher", "events", "publisher_name", "schemas"],
        "properties": {
            "name": {"type": "string"},
            "publisher": {
                "type": "string",
                "nullable": True,
                "description": "the publisher's token for root and for the publisher itself, "
                "its name for anyone else",
            },
            "events": {"type": "integer", "description": "all-time events published"},
            "publisher_name": {"type": "string", "nullable": True},
            "schemas": {
                "type": "object",
                "additionalProperties": {"type": "integer"},
                "description": "each event type's current schema version (docs/filters.md)",
            },
        },
    }
    return {"type": "array", "items": topic}


def response_schemas() -> dict[str, Doc]:
    string, integer = {"type": "string"}, {"type": "integer"}
    described_route = obj(
        {
            "topic": string,
            "priority": integer,
            "ttl": integer,
            "types": {"type": "array", "items": string},
            "coalesce": {"type": "boolean"},
            "filter": {"type": "object", "description": "its content filter (docs/filters.md)"},
            "transform": {"type": "string", "description": "its transform (docs/transforms.md)"},
        },
        nullable=("priority", "ttl", "filter", "transform"),
    )
    event_out: Doc = {
        "type": "object",
        "required": ["topic", "type", "url", "t"],
        "properties": {"topic": string, "type": string, "url": string, "t": integer,
                       "data": {"type": "object"}},
    }  # fmt: skip
    return {
        "Error": obj({"error": string}),
        "Health": obj({"status": string, "name": string, "version": string,
                       "layout": {**integer, "description": "the Redis layout this "
                                  "process reads and writes (docs/operating.md)"},
                       "hiredis": {"type": "boolean"}}),
        "Token": obj({"name": string, "token": string, "operator": {"type": "boolean"}}),
        "Replayed": obj({"replayed": integer}),
        "DeadLetter": {
            **event_out,
            "required": [*event_out["required"], "attempts", "failed_at", "last_status"],
            "properties": {**event_out["properties"], "attempts": integer,
                           "failed_at": integer, "last_status": string},
        },
        "SubscriptionInfo": obj(
            {
                "subscriber": string, "name": string, "callback": string, "uuid": string,
                "max_events": integer, "timeout": integer,
                "topics": {"type": "array", "items": string},
                "events": obj({"sent": integer, "queued": integer, "oldest": integer,
                               "filtered": integer, "transformed_out": integer},
                              nullable=("oldest",)),
                "max_attempts": integer, "health_points": integer,
                "routes": {"type": "array", "items": described_route},
                "lanes": {"type": "array", "items": lane_figures()},
                "attempts": obj({outcome: integer for outcome in OUTCOMES}),
                "paused": {**obj({"at": integer, "by": string}), "nullable": True},
                "deadletters": integer, "failures": integer, "next_attempt_at": integer,
                "event_ids": {"type": "boolean"},
                "concurrency": integer, "draining": integer,
                "in_flight": integer,
                "circuit": obj(
                    {"state": {"type": "string", "enum": ["open", "closed"]},
                     "opened_at": integer, "next_probe_at": integer,
                     "failures_in_a_row": integer},
                    nullable=("opened_at", "next_probe_at"),
                ),
                "dropped": obj({"expired": integer, "autodropped": integer,
                                "deadletters_trimmed": integer, "transformed_out": integer}),
                "transform_version": integer,
                # a secret only as set, and since when (app/models/callback_headers.py)
                "headers": {"type": "object", "additionalProperties": {"oneOf": [
                    string, obj({"secret": {"type": "boolean"}, "set_at": integer})]}},
                "client_cert": obj(
                    {"subject": string, "not_after": integer, "fingerprint": string,
                     "set_at": integer}) | {"nullable": True},
                # a broker in place of the callback, its secrets only as set
                # (app/models/destination.py): NATS's, RabbitMQ's or SQS's fields
                "destination": obj(
                    {"type": string, "url": string, "subject": string, "stream": string,
                     "exchange": string, "routing_key": string, "user": string,
                     "password": obj({"secret": {"type": "boolean"}, "set_at": integer}),
                     "token": obj({"secret": {"type": "boolean"}, "set_at": integer}),
                     "queue_url": string, "region": string, "message_group": string,
                     "endpoint": string, "access_key_id": string,
                     "secret_access_key": obj({"secret": {"type": "boolean"},
                                               "set_at": integer})},
                ) | {"nullable": True, "required": ["type"]},
                # an OAuth2 secret only as set, and since when (app/models/oauth2.py)
                "auth": obj({"type": {"type": "string", "enum": ["basic", "jwt", "oauth2"]},
                             "audience": string, "token_url": string, "client_id": string,
                             "scope": string,
                             "client_secret": obj({"secret": {"type": "boolean"},
                                                   "set_at": integer}),
                             "private_key": obj({"secret": {"type": "boolean"},
                                                 "set_at": integer})},
                            nullable=("audience", "scope")) | {"required": ["type"]},
            },
            nullable=("uuid", "max_attempts", "next_attempt_at", "name", "draining",
                      "transform_version"),
        ),
    }  # fmt: skip


_FIELD: Doc = {
    "type": "object",
    "required": ["name", "required", "secret", "description", "example"],
    "properties": {"name": {"type": "string"}, "required": {"type": "boolean"},
                   "secret": {"type": "boolean"}, "description": {"type": "string"},
                   "example": {"type": "string"}},
}  # fmt: skip
# GET /destination-types (app/models/destination_types.py's described_types)
DESTINATION_TYPES: Doc = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["type", "description", "fields"],
        "properties": {"type": {"type": "string"}, "description": {"type": "string"},
                       "fields": {"type": "array", "items": _FIELD}},
    },
}  # fmt: skip


@functools.cache
def document(rules: Rules) -> dict[str, Any]:
    """The API as this server applies it: request schemas come from the validators' field
    definitions under the server's own settings (`rules`), so what the document allows,
    the server accepts (a schemathesis test sends it valid examples and expects them taken).
    """
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "busbar",
            "version": version(),
            "description": "An HTTP event bus with Routemaster's API. Authenticate with HTTP "
            "Basic: the API token is the username, the password is ignored.",
        },
        "components": {
            "securitySchemes": {"basic": {"type": "http", "scheme": "basic"}},
            "schemas": {
                "Event": EVENT.openapi(rules),
                "Route": ROUTE.openapi(rules),
                "Subscription": SUBSCRIPTION.openapi(rules),
                "TokenRequest": TOKEN_REQUEST.openapi(rules),
                "DataValue": DATA_VALUE,
                "DestinationTypes": DESTINATION_TYPES,
                **response_schemas(),
                **console_schemas(),
                **secrets_schemas(),
                **filters_schemas(),
                **transforms_schemas(),
                **schemas_schemas(),
                **attempts_schemas(),
                **erasures_schemas(),
            },
        },
        "paths": paths(),
    }


@blueprint.get("/openapi.json")
def openapi() -> Response:
    settings = web_context().settings
    rules = Rules(
        settings.allow_http, Policy.of(settings),
        transforms=(settings.transform_max_bytes, settings.max_event_data),
    )  # fmt: skip
    return jsonify(document(rules))
