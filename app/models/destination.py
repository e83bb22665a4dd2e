"""A subscription's destination: a message broker busbar publishes its events to, in
place of POSTing them to a callback (docs/destinations.md).

`{"type": "nats", "url": "tls://nats.example.com:4222", "subject": "orders.{type}",
"stream": "ORDERS", "user": "busbar", "password": "..."}` (or `"token"` in place of
user and password). The URL names the broker only: no user:password@ (it would be
listed and logged), no path; `tls://` unless BUSBAR_ALLOW_HTTP allows plain `nats://`
as it allows plain http, and a host the callback policy refuses is refused here too
(app/models/callback_policy.py): a broker is one more address a subscriber makes the bus
connect to. The password and the token are write-only: sealed before Redis holds them
(app/models/sealed.py), their place the associated data, and listed only as
`{"secret": true, "set_at": ...}`, as header secrets are (app/models/callback_headers.py).

The subject is a template: `{topic}`, `{type}` and `{key}` take the event's, each made
one subject token (a character NATS gives a meaning to, or any outside
[A-Za-z0-9_-], becomes `_`; an empty value is `_`), so no event can publish beyond the
subjects its template allows (no `*`, `>`, or a token more). `stream`, when given, is
the stream the broker must put the message in (JetStream's expected stream): a subject
another stream captured is then a failed attempt, not a message in the wrong place.
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from app.errors import InvalidInput
from app.models.callback_policy import check_callback
from app.models.fields import Doc, Field, Rules
from app.models.sealed import Sealer

TYPES = ("nats",)
SCHEMES = {"nats": ("tls", "nats")}  # the first is the one a production bus takes
DEFAULT_PORT = 4222
MAX_URL = 512
MAX_SUBJECT = 255  # the template's characters
MAX_SECRET = 4096
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a user or a stream name
TOKEN = re.compile(r"[A-Za-z0-9_-]+")  # a literal subject token
PLACEHOLDERS = ("topic", "type", "key")
SECRETS = ("password", "token")
FIELDS = ("type", "url", "subject", "stream", "user", *SECRETS)
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class Destination:
    type: str
    url: str
    subject: str  # a template (above)
    stream: str | None = None
    user: str | None = None
    password: str | None = None  # write-only
    token: str | None = None  # write-only

    def stored(self, sealer: Sealer, owner: str, now: int) -> str:
        """What Redis holds: the secrets sealed for `owner` (the subscriber's token), the
        time they were set, what a listing shows beside them."""
        row: dict[str, Any] = {
            "type": self.type, "url": self.url, "subject": self.subject,
            "stream": self.stream, "user": self.user, "set_at": now,
        }  # fmt: skip
        for name in SECRETS:
            value = getattr(self, name)
            if value is not None:
                row[name] = sealer.seal(value, where(owner, name))
        return json.dumps(row, separators=(",", ":"))

    def subject_for(self, topic: str, type_: str, key: str | None) -> str:
        """The event's subject: each placeholder one safe token."""
        values = {"topic": topic, "type": type_, "key": key or ""}
        return self.subject.format_map({k: token_of(v) for k, v in values.items()})


# What GET /destination-types tells a console or a client, so it can render a form:
# each type's fields in order, whether required, whether write-only, an example.
DESCRIBED: dict[str, dict[str, Any]] = {
    "nats": {
        "description": "a NATS JetStream stream: one message per event, its id as "
        "Nats-Msg-Id, acknowledged on the stream's PubAck",
        "fields": [
            {"name": "url", "required": True, "secret": False,
             "description": "the broker: tls://host[:port] (plain nats:// only where "
             "BUSBAR_ALLOW_HTTP is set); no user:password@",
             "example": "tls://nats.example.com:4222"},
            {"name": "subject", "required": True, "secret": False,
             "description": "subject tokens between dots; {topic}, {type} and {key} take "
             "the event's, each one token", "example": "orders.{type}.{key}"},
            {"name": "stream", "required": False, "secret": False,
             "description": "the stream that must store each message (else a failed "
             "attempt, stream_mismatch)", "example": "ORDERS"},
            {"name": "user", "required": False, "secret": False,
             "description": "with password", "example": "busbar"},
            {"name": "password", "required": False, "secret": True,
             "description": "with user; sealed at rest, never listed", "example": "..."},
            {"name": "token", "required": False, "secret": True,
             "description": "in place of user and password; sealed at rest, never listed",
             "example": "..."},
        ],
    },
}  # fmt: skip


def described_types() -> list[dict[str, Any]]:
    return [{"type": name, **DESCRIBED[name]} for name in TYPES]


def token_of(value: str) -> str:
    return _UNSAFE.sub("_", value) or "_"


def where(owner: str, name: str) -> str:
    """A secret's place, the associated data of its seal."""
    return f"subscriber {owner} destination {name}"


def opened(text: bytes | str, sealer: Sealer, owner: str) -> Destination:
    """The stored destination with its secrets opened (Unsealable when one does not)."""
    row = json.loads(text)
    secrets = {n: sealer.open(row[n], where(owner, n)) for n in SECRETS if row.get(n)}
    return Destination(row["type"], row["url"], row["subject"], row.get("stream"),
                       row.get("user"), **secrets)  # fmt: skip


def described(text: bytes | str | None) -> dict[str, Any] | None:
    """What a listing shows: the secrets only as set, and when."""
    if not text:
        return None
    row = json.loads(text)
    shown: dict[str, Any] = {k: row[k] for k in ("type", "url", "subject") if k in row}
    shown.update({k: row[k] for k in ("stream", "user") if row.get(k) is not None})
    for name in SECRETS:
        if row.get(name):
            shown[name] = {"secret": True, "set_at": row["set_at"]}
    return shown


def parse(value: Any, where_: str, rules: Rules) -> Destination:
    if not isinstance(value, dict):
        raise InvalidInput(f"{where_} must be a JSON object with `type`, `url` and `subject`")
    unknown = set(value) - set(FIELDS)
    if unknown:
        raise InvalidInput(f"{where_}: unknown field {sorted(unknown)[0]!r}")
    kind = value.get("type")
    if kind not in TYPES:
        raise InvalidInput(f"{where_}.type must be one of {', '.join(TYPES)}")
    url = _url(value.get("url"), f"{where_}.url", kind, rules)
    subject = _subject(value.get("subject"), f"{where_}.subject")
    names = {n: _name(value.get(n), f"{where_}.{n}") for n in ("stream", "user")}
    secrets = {n: _secret(value.get(n), f"{where_}.{n}") for n in SECRETS}
    if secrets["token"] is not None and (names["user"] or secrets["password"]):
        raise InvalidInput(f"{where_}: give either `token`, or `user` and `password`, not both")
    if (names["user"] is None) != (secrets["password"] is None):
        raise InvalidInput(f"{where_}: `user` and `password` go together")
    return Destination(kind, url, subject, **names, **secrets)


def _url(value: Any, where_: str, kind: str, rules: Rules) -> str:
    schemes = SCHEMES[kind] if rules.allow_http else SCHEMES[kind][:1]
    written = " or ".join(f"{s}://host:port" for s in schemes)
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_URL:
        raise InvalidInput(f"{where_} must be a URL of at most {MAX_URL} characters: {written}")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise InvalidInput(f"{where_} is not a URL: {written}") from None
    if parts.scheme not in schemes:
        plain = " (plain nats:// needs BUSBAR_ALLOW_HTTP)" if parts.scheme == "nats" else ""
        raise InvalidInput(f"{where_} must be {written}{plain}")
    if "@" in parts.netloc:
        raise InvalidInput(
            f"{where_} must not hold a user or password (user:password@host): give them "
            "as the destination's `user` and `password` (or `token`), which are write-only"
        )
    if not parts.hostname or parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InvalidInput(f"{where_} must name a broker only: {written}")
    check_callback(value, where_, rules.callbacks)
    return f"{parts.scheme}://{parts.netloc}" if port else f"{value.rstrip('/')}:{DEFAULT_PORT}"


def _subject(value: Any, where_: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_SUBJECT:
        raise InvalidInput(f"{where_} must be a string of 1 to {MAX_SUBJECT} characters")
    for token in value.split("."):
        try:
            parts = list(string.Formatter().parse(token))
        except ValueError:
            raise InvalidInput(f"{where_} has an unmatched brace in {token!r}") from None
        literal = "".join(text for text, *_ in parts)
        names = [name for _, name, *_ in parts if name is not None]
        for name in names:
            if name not in PLACEHOLDERS:
                raise InvalidInput(
                    f"{where_}: unknown placeholder {{{name}}}; it may use "
                    + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
                )
        if not names and not TOKEN.fullmatch(literal):
            raise InvalidInput(
                f"{where_}: {token!r} is no subject token: tokens are [A-Za-z0-9_-]+ "
                "between dots (no wildcards, no spaces, none empty)"
            )
        if names and literal and not TOKEN.fullmatch(literal):
            raise InvalidInput(
                f"{where_}: {token!r} may hold only [A-Za-z0-9_-] beside its placeholders"
            )
        if any(spec or conversion for _, name, spec, conversion in parts if name is not None):
            raise InvalidInput(f"{where_}: a placeholder takes no format ({token!r})")
    return value


def _name(value: Any, where_: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise InvalidInput(f"{where_} must be 1 to 64 characters of [A-Za-z0-9_-]")
    return value


def _secret(value: Any, where_: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_SECRET:
        raise InvalidInput(f"{where_} must be a string of 1 to {MAX_SECRET:,} characters")
    return value


@dataclass(frozen=True)
class DestinationField(Field):
    """The `destination` field of POST /subscription (in place of `callback`)."""

    nullable: bool = False
    description: str = (
        'a message broker the events are published to in place of a callback: {"type": '
        '"nats", "url": "tls://host:4222", "subject": "orders.{type}", "stream"?, "user"?, '
        '"password"?, "token"?}; the password and the token are sealed at rest and never '
        "listed (docs/destinations.md)"
    )

    def check(self, value: Any, where: str, rules: Rules) -> Destination:
        return parse(value, where, rules)

    def shape(self, rules: Rules) -> Doc:
        """Narrower than what busbar takes where the rules cannot be written as a schema
        (the subject's tokens, the address policy): the description says the rest."""
        schemes = SCHEMES["nats"] if rules.allow_http else SCHEMES["nats"][:1]
        name: Doc = {"type": "string", "pattern": f"^{NAME.pattern}$"}
        secret: Doc = {"type": "string", "minLength": 1, "maxLength": MAX_SECRET}
        return {
            "type": "object",
            "required": ["type", "url", "subject"],
            "additionalProperties": False,
            "properties": {
                "type": {"type": "string", "enum": list(TYPES)},
                "url": {"type": "string", "maxLength": MAX_URL,
                        "pattern": f"^(?:{'|'.join(schemes)})://[A-Za-z0-9.-]+:[0-9]{{1,5}}$"},
                "subject": {"type": "string", "maxLength": MAX_SUBJECT,
                            "pattern": r"^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$"},
                "stream": name,
                "user": name,
                "token": secret,
            },
        }  # fmt: skip
