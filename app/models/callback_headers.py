"""Headers of the subscriber's choosing, sent with every delivery to its callback (an
API key its gateway wants, a tenant or an environment name).

A subscription's `headers` maps a header name to its value, or to `{"value": ...,
"secret": true}` for a value that is write-only: sealed before Redis holds it
(app/models/sealed.py), never listed (a listing says it is set, and since when), opened
only by the worker that sends it. `{"secret": true}` without a value keeps the secret
already stored under that name, so a client can change its other settings without
holding the secret. Without `headers` a new subscription has none and a changed one
keeps what it had; `{}` removes them all.

Names that would change how the request is framed or routed, or pass for busbar's own
identity and signature, are refused with a 400 naming them (docs/callback-auth.md).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from app.errors import InvalidInput
from app.models.fields import Doc, Field, Rules

MAX_HEADERS = 20
MAX_VALUE = 2048  # characters of one value
MAX_TOTAL = 8192  # bytes of every name and value together
NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")  # RFC 9110's token, bounded
VALUE = re.compile(r"[!-~](?:[ \t!-~]*[!-~])?")  # visible ASCII, inner spaces and tabs
FRAMING = {
    "host", "content-length", "transfer-encoding", "te", "trailer", "connection",
    "keep-alive", "upgrade", "expect", "content-type", "content-encoding",
    "proxy-connection", "proxy-authorization", "http2-settings",
}  # fmt: skip
IDENTITY = {
    "authorization", "user-agent", "webhook-id", "webhook-timestamp", "webhook-signature",
    "traceparent", "tracestate",
}  # fmt: skip
OURS = "busbar-"  # Busbar-Replay and whatever busbar sends next


@dataclass(frozen=True)
class Header:
    name: str
    value: str | None  # None: a secret kept as stored
    secret: bool = False


def refused(name: str) -> str | None:
    """Why busbar cannot send a header of that name, or None."""
    lower = name.lower()
    if lower in FRAMING:
        return "it frames or routes the request, which is busbar's to write"
    if lower == "authorization":
        return (
            "it carries the subscription's Basic uuid (and, with `auth`, its token); "
            "put a static key in a header of its own, such as X-Api-Key"
        )
    if lower in IDENTITY or lower.startswith(OURS):
        return "busbar sends it to identify and sign deliveries"
    return None


def parse_header(name: Any, given: Any, where: str) -> Header:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidInput(f"{where}: header names are 1 to 64 characters of an HTTP token")
    why = refused(name)
    if why is not None:
        raise InvalidInput(f"{where}.{name} cannot be set: {why}")
    secret = False
    if isinstance(given, dict):
        unknown = set(given) - {"value", "secret"}
        if unknown:
            raise InvalidInput(f"{where}.{name}: unknown field {sorted(unknown)[0]!r}")
        secret = given.get("secret", False)
        if not isinstance(secret, bool):
            raise InvalidInput(f"{where}.{name}.secret must be true or false")
        if "value" not in given:
            if not secret:
                raise InvalidInput(f"{where}.{name}.value is required (or secret: true to keep)")
            return Header(name, None, True)
        given = given["value"]
    if not isinstance(given, str) or not 1 <= len(given) <= MAX_VALUE:
        raise InvalidInput(f"{where}.{name} must be a string of 1 to {MAX_VALUE} characters")
    if not VALUE.fullmatch(given):
        raise InvalidInput(
            f"{where}.{name} must be printable ASCII (spaces and tabs inside), without line breaks"
        )
    return Header(name, given, secret)


@dataclass(frozen=True)
class Headers(Field):
    """The `headers` field of POST /subscription."""

    nullable: bool = False  # a null is a 400 naming the field (app/models/subscription.py)
    description: str = (
        f"headers sent with every delivery (at most {MAX_HEADERS}): name -> value, or "
        '{"value": ..., "secret": true} for a write-only value (sealed at rest, never '
        'listed); {"secret": true} keeps the stored secret. Absent: a new subscription '
        "has none, a changed one keeps its own; {} removes them. Names: any HTTP token of "
        "up to 64 characters (three shown); framing, Authorization, User-Agent, webhook-*, "
        "trace and Busbar-* headers are refused"
    )

    def check(self, value: Any, where: str, rules: Rules) -> tuple[Header, ...]:  # noqa: ARG002
        if not isinstance(value, dict):
            raise InvalidInput(f"{where} must be a JSON object of header name -> value")
        if len(value) > MAX_HEADERS:
            raise InvalidInput(f"{where}: at most {MAX_HEADERS} headers")
        found = [parse_header(name, given, where) for name, given in value.items()]
        lowered = [h.name.lower() for h in found]
        for name in lowered:
            if lowered.count(name) > 1:
                raise InvalidInput(f"{where}: {name} is given twice (names are case-blind)")
        size = sum(len(h.name) + len(h.value or "") for h in found)
        if size > MAX_TOTAL:
            raise InvalidInput(f"{where}: {size} bytes of names and values, at most {MAX_TOTAL}")
        return tuple(found)

    def shape(self, rules: Rules) -> Doc:  # noqa: ARG002
        """Narrower than what busbar takes, as far as OpenAPI 3.0 says it: it has no
        propertyNames, so a few names stand for every allowed one (the description
        says which are refused), and `{"secret": true}`, which keeps a stored secret and
        is refused when none is, is in the description only."""
        value = {"type": "string", "minLength": 1, "maxLength": MAX_VALUE,
                 "pattern": f"^{VALUE.pattern}$"}  # fmt: skip
        sealed = {
            "type": "object",
            "required": ["value"],
            "properties": {"value": value, "secret": {"type": "boolean"}},
            "additionalProperties": False,
        }
        either = {"oneOf": [value, sealed]}
        return {
            "type": "object",
            "properties": {name: either for name in ("X-Api-Key", "X-Tenant", "X-Env")},
            "additionalProperties": False,
        }


def stored(text: bytes | str | None) -> list[list[Any]]:
    """The subscriber hash's `headers` field: [name, value or sealed value, secret (0/1),
    set_at ms] per header, in the order given."""
    return json.loads(text) if text else []


def described(text: bytes | str | None) -> dict[str, Any]:
    """What a listing shows: plain values as they are, a secret only as set and when."""
    return {
        name: {"secret": True, "set_at": set_at} if secret else value
        for name, value, secret, set_at in stored(text)
    }
