"""The pieces every OpenAPI operation is built from: who may call, which errors, refs."""

from __future__ import annotations

from collections.abc import Mapping

from app.models.fields import Doc, Rules
from app.models.route import ROUTE
from app.models.tokens import TOKEN_PATTERN, TOKEN_REQUEST
from app.web import console

CLIENT, ROOT, ANYONE = "a client token", "the root key", "no credentials"
REASONS = {
    400: "invalid input; the message names the field",
    401: "no credentials, or an unknown token",
    403: "known credentials that may not do this",
    404: "no such thing (topic, subscription, endpoint)",
    409: "conflict with what exists",
    413: "body over BUSBAR_MAX_BODY_BYTES",
    422: "an Idempotency-Key reused with another body",
    429: "over BUSBAR_PUBLISH_RATE, or too many failed logins from here; see Retry-After",
    503: "Redis does not answer",
}


def ref(name: str) -> Doc:
    return {"$ref": f"#/components/schemas/{name}"}


def json_content(schema: Doc) -> Doc:
    return {"application/json": {"schema": schema}}


def operation(
    summary: str,
    who: str,
    ok: Mapping[int, Doc | None],
    errors: tuple[int, ...] = (),
    body: Doc | None = None,
    name: str | None = None,
) -> Doc:
    """One operation; `ok` maps success codes to a JSON schema (None: no body)."""
    responses: Doc = {}
    for code, schema in ok.items():
        responses[str(code)] = {"description": "success"}
        if schema is not None:
            responses[str(code)]["content"] = json_content(schema)
    auth_errors = () if who == ANYONE else (401, 403, 429)  # 429: app/web/throttle.py
    for code in sorted({*errors, *auth_errors, 503}):
        responses[str(code)] = {"description": REASONS[code], "content": json_content(ref("Error"))}
    doc: Doc = {"summary": summary, "description": f"Needs {who}.", "responses": responses}
    if who != ANYONE:
        doc["security"] = [{"basic": []}]
    if body is not None:
        doc["requestBody"] = {"required": True, "content": json_content(body)}
    if name is not None:
        schema = PARAMETERS[name]
        doc["parameters"] = [{"name": name, "in": "path", "required": True, "schema": schema}]
    return doc


PARAMETERS = {
    "name": ROUTE.fields["topic"].openapi(Rules()),
    "token": {"type": "string", "pattern": f"^{TOKEN_PATTERN.pattern}$"},
    "client": TOKEN_REQUEST.fields["name"].openapi(Rules()),
    "asset": {"type": "string", "enum": list(console.ASSETS)},
    "erasure_id": {"type": "string", "pattern": "^er_[0-9a-f]{16}$"},
}


def obj(properties: dict[str, Doc], nullable: tuple[str, ...] = ()) -> Doc:
    """A response object: every property present; the listed ones may be null."""
    props = {k: {**v, "nullable": True} if k in nullable else v for k, v in properties.items()}
    return {"type": "object", "required": list(props), "properties": props}
