"""The OpenAPI of erasures (asking for one, its receipt, the list) and of a topic's
payload retention."""

from __future__ import annotations

from app.models.erasures import REQUEST, STORES
from app.models.fields import Doc, Rules, TopicName
from app.models.retention import REQUEST as RETENTION_REQUEST
from app.web.openapi.parts import CLIENT, ROOT, obj, operation, ref

WHO = f"{ROOT}, or {CLIENT} (on the topics it publishes; its own erasures)"


def erasures_paths() -> dict[str, Doc]:
    return {
        "/erasures": {
            "post": operation(
                "erase one url's or key's events from every store; answered at once, "
                "carried out by the workers",
                WHO,
                {202: ref("Erasure")},
                (400, 413),
                body=ref("ErasureRequest"),
            ),
            "get": operation(
                "erasures, newest first, at most 100",
                WHO,
                {200: {"type": "array", "items": ref("Erasure")}},
            ),
        },
        "/topics/{name}/retention": {
            "get": operation(
                "how long the topic's delivered and dead-lettered payloads are kept",
                f"{CLIENT} or {ROOT}",
                {200: ref("Retention")},
                (400, 404),
                name="name",
            ),
            "put": operation(
                "set it (null: the bus's default, BUSBAR_PAYLOAD_RETENTION_S)",
                f"{CLIENT} (the topic's publisher) or {ROOT}",
                {200: ref("Retention")},
                (400, 404, 413),
                body=ref("RetentionRequest"),
                name="name",
            ),
        },
        "/erasures/{erasure_id}": {
            "get": operation(
                "an erasure's receipt: its state and what each store removed",
                WHO,
                {200: ref("Erasure")},
                (404,),
                name="erasure_id",
            )
        },
    }


def erasures_schemas() -> dict[str, Doc]:
    counts = {
        store: obj({name: {"type": "integer", "minimum": 0} for name in names})
        for store, names in STORES.items()
    }
    lake = {
        "type": "object",
        "required": ["path", "state"],
        "properties": {
            "path": {"type": "string"},
            "state": {"type": "string", "enum": ["erased", "pending", "stale"]},
            "events": {"type": "integer"},
            "attempts": {"type": "integer"},
            "files_rewritten": {"type": "integer"},
            "bytes_rewritten": {"type": "integer"},
            "at": {"type": "integer"},
        },
    }
    request = REQUEST.openapi(Rules())
    request["properties"]["topics"]["items"] = TopicName().openapi(Rules())
    request["oneOf"] = [{"required": ["url"]}, {"required": ["key"]}]
    return {
        "RetentionRequest": RETENTION_REQUEST.openapi(Rules()),
        "Retention": obj(
            {
                "topic": {"type": "string"},
                "retention_s": {"type": "integer", "minimum": 0, "nullable": True},
                "effective_s": {"type": "integer", "minimum": 0, "description": "0: kept"},
            }
        ),
        "ErasureRequest": request,
        "Erasure": {
            "type": "object",
            "required": [
                "id",
                "state",
                "by",
                "topics",
                "before",
                "created_at",
                "updated_at",
                "finished_at",
                "passes",
                "stores",
            ],
            "properties": {
                "id": {"type": "string"},
                "state": {"type": "string", "enum": ["running", "done"]},
                "by": {"type": "string", "description": "the client's name, or root"},
                "url": {"type": "string"},
                "key": {"type": "string"},
                "url_fingerprint": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
                "key_fingerprint": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
                "topics": {
                    "type": "array",
                    "items": {"type": "string"},
                    "nullable": True,
                    "description": "null: every topic",
                },
                "before": {"type": "integer"},
                "created_at": {"type": "integer"},
                "updated_at": {"type": "integer"},
                "finished_at": {"type": "integer", "nullable": True},
                "passes": {"type": "integer", "minimum": 1},
                "redis_done_at": {"type": "integer", "nullable": True},
                "stores": obj(counts),
                "lakes": {"type": "array", "items": lake},
            },
        },
    }
