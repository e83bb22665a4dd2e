"""The OpenAPI of what the operator console added: its files, /workers, /history and the
root key's access to any subscriber's dead letters."""

from __future__ import annotations

from app.models.fields import Doc
from app.web.openapi.parts import ANYONE, ROOT, obj, operation, ref


def console_paths() -> dict[str, Doc]:
    """What the operator console adds: its files, workers, history, root's dead letters."""
    by_name = (400, 404, 409)
    return {
        "/console": {"get": text_operation("the operator console (HTML)", ("text/html",))},
        "/console/{asset}": {
            "get": text_operation(
                "the console's script and style", ("text/javascript", "text/css"), "asset"
            )
        },
        "/workers": {
            "get": operation(
                "worker processes: heartbeat age, jobs in flight",
                ROOT,
                {200: {"type": "array", "items": ref("Worker")}},
            )
        },
        "/origins": {
            "get": operation(
                "callback origins: adaptive connection limit, connections, waiting, why",
                ROOT,
                {200: {"type": "array", "items": ref("Origin")}},
            )
        },
        "/history": {
            "get": operation("per-minute figures of the last hour", ROOT, {200: ref("History")})
        },
        "/replays": {
            "get": operation(
                "lake replays (busbar spark replay), newest first, at most 100",
                ROOT,
                {200: {"type": "array", "items": ref("Replay")}},
            )
        },
        "/subscribers/{client}/deadletters": {
            "get": operation(
                "a subscriber's dead letters, by client name",
                ROOT,
                {200: {"type": "array", "items": ref("DeadLetter")}},
                by_name,
                name="client",
            ),
            "delete": operation(
                "forget a subscriber's dead letters", ROOT, {204: None}, by_name, name="client"
            ),
        },
        "/subscribers/{client}/deadletters/replay": {
            "post": operation(
                "requeue a subscriber's dead letters",
                ROOT,
                {202: ref("Replayed")},
                by_name,
                name="client",
            )
        },
    }


def text_operation(summary: str, types: tuple[str, ...], name: str | None = None) -> Doc:
    doc = operation(summary, ANYONE, {}, (404,) if name else (), name=name)
    content = {t: {"schema": {"type": "string"}} for t in types}
    doc["responses"]["200"] = {"description": "success", "content": content}
    return doc


REPLAY_STATES = ("running", "stopped", "done", "failed")  # spark/replay.py writes them


def console_schemas() -> dict[str, Doc]:
    string, integer = {"type": "string"}, {"type": "integer"}
    point = obj(
        {
            "start": integer,
            "end": integer,
            "published": integer,
            "delivered": integer,
            "failed": integer,
            "batches": integer,
            "latency_mean_ms": integer,
            "latency_p50_ms": integer,
            "latency_p99_ms": integer,
            "partial": {"type": "boolean"},
        },
        nullable=("latency_mean_ms", "latency_p50_ms", "latency_p99_ms"),
    )
    return {
        "Replay": obj(
            {"id": string, "target": string, "by": string, "lake": string,
             "selection": {"type": "object"}, "selected": integer, "position": integer,
             "lane": integer, "state": {"type": "string", "enum": list(REPLAY_STATES)},
             "started_at": integer, "updated_at": integer, "note": string, "as_of": integer},
        ),
        "Worker": obj(
            {"worker": string, "last_heartbeat": integer, "heartbeat_age_ms": integer,
             "alive": {"type": "boolean"}, "jobs_in_flight": integer},
            nullable=("last_heartbeat", "heartbeat_age_ms"),
        ),
        "Origin": obj(
            {"origin": string, "limit": integer, "ceiling": integer, "open": integer,
             "connecting": integer, "waiting": integer, "answer_ms": {"type": "number"},
             "reason": string, "changed_ms": integer, "workers": integer},
        ),
        "History": obj(
            {"now": integer, "points": {"type": "array", "items": point}, "total": point},
            nullable=("total",),
        ),
    }  # fmt: skip
