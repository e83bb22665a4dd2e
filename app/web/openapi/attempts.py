"""The OpenAPI of the operators' endpoints: the attempt log (app/web/attempts.py) and
pausing a subscriber (app/web/pausing.py)."""

from __future__ import annotations

from app.models.attempt_result import OUTCOMES
from app.models.attempts import MOST
from app.models.fields import Doc
from app.web.openapi.parts import CLIENT, ROOT, obj, operation, ref

INTEGER: Doc = {"type": "integer"}
TEXT: Doc = {"type": "string"}


def _parameters() -> list[Doc]:
    def query(name: str, schema: Doc, description: str) -> Doc:
        return {"name": name, "in": "query", "required": False, "schema": schema,
                "description": description}  # fmt: skip

    outcome = {"type": "string", "pattern": f"^({'|'.join(OUTCOMES)})(,({'|'.join(OUTCOMES)}))*$"}
    time = {"type": "string", "pattern": "^[0-9]{1,15}$"}
    return [
        query("outcome", outcome, "only these outcomes, comma-separated"),
        query("since", time, "attempts at or after (ISO 8601 or epoch ms)"),
        query("until", time, "attempts before (ISO 8601 or epoch ms)"),
        query("batch", {"type": "string", "pattern": "^[0-9]{1,20}$"}, "one batch's attempts"),
        query(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": MOST, "default": 100},
            "attempts in a page",
        ),
        query(
            "before",
            {"type": "string", "pattern": "^[0-9]{1,15}-[0-9]{1,10}$"},
            "the `next` of the page before",
        ),
    ]


def attempts_paths() -> dict[str, Doc]:
    ok = {200: ref("Attempts")}
    own = operation("the subscriber's delivery attempts, newest first", CLIENT, ok, (400,))
    named = operation(
        "a subscriber's delivery attempts, by client name", ROOT, ok, (400, 404, 409),
        name="client",
    )  # fmt: skip
    own["parameters"] = _parameters()
    named["parameters"] = named["parameters"] + _parameters()
    paths: dict[str, Doc] = {
        "/subscriber/attempts": {"get": own},
        "/subscribers/{client}/attempts": {"get": named},
    }
    batch_id = {"name": "batch_id", "in": "path", "required": True,
                "schema": {"type": "string", "pattern": "^[0-9]{1,18}$"}}  # fmt: skip
    own_batch = operation("a queued batch's events", CLIENT, {200: ref("QueuedBatch")}, (400, 404))
    own_batch["parameters"] = [batch_id]
    named_batch = operation(
        "a queued batch's events, by client name", ROOT, {200: ref("QueuedBatch")},
        (400, 404, 409), name="client",
    )  # fmt: skip
    named_batch["parameters"] = [*named_batch["parameters"], batch_id]
    paths["/subscriber/batches/{batch_id}"] = {"get": own_batch}
    paths["/subscribers/{client}/batches/{batch_id}"] = {"get": named_batch}
    for how, summary in (("pause", "stop sending; events keep queuing"),
                         ("resume", "send again, in order")):  # fmt: skip
        paths[f"/subscriber/{how}"] = {
            "post": operation(
                f"{how} the subscriber: {summary}", CLIENT, {200: ref("Pausing")}, (404,)
            )
        }
        paths[f"/subscribers/{{client}}/{how}"] = {
            "post": operation(
                f"{how} a subscriber, by client name",
                ROOT,
                {200: ref("Pausing")},
                (400, 404, 409),
                name="client",
            )
        }
    return paths


def attempts_schemas() -> dict[str, Doc]:
    attempt = obj(
        {
            "id": {**TEXT, "description": "its place in the log: a page's `next` names one"},
            "at": {**INTEGER, "description": "when it was recorded, epoch ms"},
            "batch": TEXT,
            "events": INTEGER,
            "lane": INTEGER,
            "attempt": {**INTEGER, "description": "the batch's attempt number"},
            "worker": {**TEXT, "description": "the worker process and its slot"},
            "duration_ms": INTEGER,
            "outcome": {"type": "string", "enum": list(OUTCOMES)},
            "status": {**INTEGER, "description": "the HTTP status; null when none came"},
            "reason": {**TEXT, "description": "why no status came (docs/semantics.md)"},
            "retry_after_ms": {**INTEGER, "description": "the wait a 429/503 asked for"},
            "body": {**TEXT, "description": "the answer's first KiB"},
            "partition": {
                **TEXT,
                "description": "`<n>.<p>`: the partition of a subscriber "
                "of concurrency n > 1; null at 1",
            },
            "transform_version": {
                **INTEGER,
                "description": "the version of the subscription's transforms the attempt "
                "ran (docs/transforms.md); null: it had none",
            },
        },
        nullable=("status", "reason", "retry_after_ms", "partition", "transform_version"),
    )
    page = obj(
        {"attempts": {"type": "array", "items": ref("Attempt")},
         "next": {**TEXT, "description": "`before` for the next page; null: no more"}},
        nullable=("next",),
    )  # fmt: skip
    paused = {**obj({"at": {**INTEGER, "description": "since when, epoch ms"},
                     "by": {**TEXT, "description": "who paused it: a client's name, or root"}}),
              "nullable": True}  # fmt: skip
    queued = obj(
        {"batch": TEXT, "lane": INTEGER, "created_at": INTEGER,
         "attempts": {**INTEGER, "description": "attempts counted so far"},
         "in_flight": {"type": "boolean"},
         "events": {"type": "array", "items": {"type": "object"}}}
    )  # fmt: skip
    return {
        "Attempt": attempt, "Attempts": page, "Pausing": obj({"paused": paused}),
        "QueuedBatch": queued,
    }  # fmt: skip
