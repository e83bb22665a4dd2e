"""A subscription's destination: a message broker busbar publishes its events to, in
place of POSTing them to a callback (docs/destinations.md); each broker's fields are
its Kind's (app/models/destination_types.py).

`{"type": "nats", "url": "tls://nats.example.com:4222", "subject": "orders.{type}",
"stream": "ORDERS", "user": "busbar", "password": "..."}`, or `{"type": "rabbitmq", "url":
"amqps://rabbitmq.example.com/orders", "exchange": "orders", "routing_key":
"orders.{type}", "user": ..., "password": ...}`. The URL names the broker only (and, for
RabbitMQ, the virtual host as its path): no user:password@ (it would be listed and
logged); the encrypted scheme unless BUSBAR_ALLOW_HTTP allows the plain one as it allows
plain http, and a host the callback policy refuses is refused here too
(app/models/callback_policy.py): a broker is one more address a subscriber makes the bus
connect to. The password and the token are write-only: sealed before Redis holds them
(app/models/sealed.py), their place the associated data, and listed only as
`{"secret": true, "set_at": ...}`, as header secrets are (app/models/callback_headers.py).

The subject (or routing key) is a template: `{topic}`, `{type}` and `{key}` take the
event's, each made one word (a character outside [A-Za-z0-9_-] becomes `_`, an empty
value is `_`), so no event can publish beyond what its template allows (no NATS `*` or
`>`, no word more). `stream`, when given, is the stream the broker must put the message
in (JetStream's expected stream): a subject another stream captured is then a failed
attempt, not a message in the wrong place.

An SQS destination, `{"type": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/
123456789012/orders.fifo", "region": "eu-west-1", "access_key_id": ..., "secret_access_key":
...}`, is held in the same fields (its Kind's `renamed`): `url` the queue URL, `user`
the access key id, `password` the secret access key, `region` its place, and
`message_group` the template (`{key}` unless given). Its `endpoint`, when given, is one
more address the policy judges.
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from app.errors import InvalidInput
from app.models.callback_policy import check_callback
from app.models.destination_types import KINDS, Kind
from app.models.fields import Doc, Field, Rules
from app.models.sealed import Sealer, resealed_in

MAX_URL = 512
MAX_SUBJECT = 255  # the template's characters
MAX_SECRET = 4096
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a user, a stream or a region name
QUEUE_PATH = re.compile(r"/[A-Za-z0-9_-]{1,64}/[A-Za-z0-9_-]{1,75}(?:\.fifo)?")  # SQS
EXCHANGE = re.compile(r"[A-Za-z0-9_.:-]{0,127}")  # "" is AMQP's default exchange
TOKEN = re.compile(r"[A-Za-z0-9_-]+")  # a literal word of a template
PLACEHOLDERS = ("topic", "type", "key")
SECRETS = ("password", "token")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class Destination:
    type: str
    url: str
    subject: str  # the template (above): NATS's subject, AMQP's routing key
    stream: str | None = None  # NATS: the stream that must store it
    user: str | None = None
    password: str | None = field(default=None, repr=False)  # write-only
    token: str | None = field(default=None, repr=False)  # write-only
    exchange: str | None = None  # RabbitMQ: the exchange ("" the default one)
    region: str | None = None  # SQS: the queue's region
    endpoint: str | None = None  # SQS: the API's address, when not the queue URL's

    @property
    def connects_to(self) -> str:
        """The broker its connection goes to: an SQS client serves every queue of one
        API address and region."""
        if self.type != "sqs":
            return self.url
        parts = urlsplit(self.endpoint or self.url)
        return f"{parts.scheme}://{parts.netloc} {self.region}"

    @property
    def fifo(self) -> bool:
        """An SQS FIFO queue: message groups and deduplication ids."""
        return self.type == "sqs" and self.url.endswith(".fifo")

    @property
    def kind(self) -> Kind:
        return KINDS[self.type]

    def stored(self, sealer: Sealer, owner: str, now: int) -> str:
        """What Redis holds, by the kind's field names: the secrets sealed for `owner`
        (the subscriber's token), the time they were set, what a listing shows."""
        kind = self.kind
        row: dict[str, Any] = {"type": self.type, "url": self.url, kind.template: self.subject,
                               kind.place: getattr(self, kind.place), "user": self.user,
                               "set_at": now}  # fmt: skip
        if self.endpoint is not None:
            row["endpoint"] = self.endpoint
        for name in SECRETS:
            value = getattr(self, name)
            if value is not None:
                row[name] = sealer.seal(value, where(owner, name))
        return json.dumps(row, separators=(",", ":"))

    def subject_for(self, topic: str, type_: str, key: str | None) -> str:
        """The event's subject (or routing key): each placeholder one safe word."""
        values = {"topic": topic, "type": type_, "key": key or ""}
        return self.subject.format_map({k: token_of(v) for k, v in values.items()})


def token_of(value: str) -> str:
    return _UNSAFE.sub("_", value) or "_"


def where(owner: str, name: str) -> str:
    """A secret's place, the associated data of its seal."""
    return f"subscriber {owner} destination {name}"


def opened(text: bytes | str, sealer: Sealer, owner: str) -> Destination:
    """The stored destination with its secrets opened (Unsealable when one does not)."""
    row = json.loads(text)
    kind = KINDS[row["type"]]
    secrets = {n: sealer.open(row[n], where(owner, n)) for n in SECRETS if row.get(n)}
    return Destination(row["type"], row["url"], row[kind.template], user=row.get("user"),
                       endpoint=row.get("endpoint"), **{kind.place: row.get(kind.place)},
                       **secrets)  # fmt: skip


def resealed(raw: bytes, sealer: Sealer, token: str) -> tuple[str, int]:
    """`busbar secrets reseal`: the field with its secrets sealed under the current key,
    and how many were not."""
    text, count = raw.decode(), 0
    for name in SECRETS:
        if json.loads(text).get(name):
            text, again = resealed_in(text.encode(), name, where(token, name), sealer)
            count += again
    return text, count


def described(text: bytes | str | None) -> dict[str, Any] | None:
    """What a listing shows: the secrets only as set, and when."""
    if not text:
        return None
    row = json.loads(text)
    kind = KINDS[row["type"]]
    shown: dict[str, Any] = {"type": row["type"], kind.named("url"): row["url"],
                             kind.template: row[kind.template]}  # fmt: skip
    for name in (kind.place, "endpoint", "user"):
        if row.get(name) is not None:
            shown[kind.named(name)] = row[name]
    for name in SECRETS:
        if row.get(name):
            shown[kind.named(name)] = {"secret": True, "set_at": row["set_at"]}
    return shown


def parse(value: Any, where_: str, rules: Rules) -> Destination:
    if not isinstance(value, dict):
        raise InvalidInput(f"{where_} must be a JSON object with `type` and its fields")
    kind = KINDS.get(value.get("type"))  # type: ignore[arg-type]  # any JSON: a miss is None
    if kind is None:
        raise InvalidInput(f"{where_}.type must be one of {', '.join(KINDS)}")
    unknown = set(value) - set(kind.names)
    if unknown:
        raise InvalidInput(f"{where_}: unknown field {sorted(unknown)[0]!r} for {kind.name}")
    for wanted in kind.fields:
        if wanted["required"] and wanted["name"] not in value:
            raise InvalidInput(f"{where_}.{wanted['name']} is required for {kind.name}")
    at = {name: f"{where_}.{kind.named(name)}" for name in ("url", "user", "password", "token")}
    url = _url(value.get(kind.named("url")), at["url"], kind, rules)
    subject = _subject(value.get(kind.template, kind.template_default),
                       f"{where_}.{kind.template}")  # fmt: skip
    place = (_exchange if kind.place == "exchange" else _name)(
        value.get(kind.place), f"{where_}.{kind.place}"
    )
    user = _name(value.get(kind.named("user")), at["user"])
    secrets = {n: _secret(value.get(kind.named(n)), at[n]) for n in kind.secrets}
    if secrets.get("token") is not None and (user or secrets["password"]):
        raise InvalidInput(f"{where_}: give either `token`, or `user` and `password`, not both")
    if (user is None) != (secrets["password"] is None):
        raise InvalidInput(f"{where_}: `{kind.named('user')}` and "
                           f"`{kind.named('password')}` go together")  # fmt: skip
    endpoint = value.get("endpoint")
    if endpoint is not None:
        endpoint = _url(endpoint, f"{where_}.endpoint", replace(kind, path=""), rules)
    return Destination(kind.name, url, subject, user=user, endpoint=endpoint,
                       **{kind.place: place}, **secrets)  # fmt: skip


def _url(value: Any, where_: str, kind: Kind, rules: Rules) -> str:
    schemes = kind.schemes if rules.allow_http else kind.schemes[:1]
    tail = "/account/name[.fifo]" if kind.path == "queue" else ""
    written = " or ".join(f"{s}://host:port{tail}" for s in schemes)
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_URL:
        raise InvalidInput(f"{where_} must be a URL of at most {MAX_URL} characters: {written}")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise InvalidInput(f"{where_} is not a URL: {written}") from None
    if parts.scheme not in schemes:
        plain = kind.schemes[1]
        needs = f" (plain {plain}:// needs BUSBAR_ALLOW_HTTP)" if parts.scheme == plain else ""
        raise InvalidInput(f"{where_} must be {written}{needs}")
    if "@" in parts.netloc:
        raise InvalidInput(
            f"{where_} must not hold a user or password (user:password@host): give them "
            "as the destination's `user` and `password`, which are write-only"
        )
    if not parts.hostname or parts.query or parts.fragment:
        raise InvalidInput(f"{where_} must name a broker only: {written}")
    if kind.path == "queue":  # the URL SQS gave the queue, kept as written
        if not QUEUE_PATH.fullmatch(parts.path):
            raise InvalidInput(f"{where_} must be a queue's URL: {written}")
        check_callback(value, where_, rules.callbacks)
        return value
    path = parts.path.strip("/")
    if path and (kind.path != "vhost" or "/" in path):
        raise InvalidInput(f"{where_} must name a broker only: {written}")
    check_callback(value, where_, rules.callbacks)
    netloc = parts.netloc if port else f"{parts.netloc}:{kind.ports[parts.scheme]}"
    return f"{parts.scheme}://{netloc}" + (f"/{path}" if path else "")


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


def _exchange(value: Any, where_: str) -> str:
    if not isinstance(value, str) or not EXCHANGE.fullmatch(value):
        raise InvalidInput(f"{where_} must be 0 to 127 characters of [A-Za-z0-9_.:-]")
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
        '"password"?, "token"?} or {"type": "rabbitmq", "url": "amqps://host:5671/vhost", '
        '"exchange": "orders", "routing_key": "orders.{type}", "user"?, "password"?} or '
        '{"type": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/'
        'orders.fifo", "region": "eu-west-1", "message_group"?, "endpoint"?, '
        '"access_key_id", "secret_access_key"}; the password, the token and the secret '
        "access key are sealed at rest and never listed (docs/destinations.md)"
    )

    def check(self, value: Any, where: str, rules: Rules) -> Destination:
        return parse(value, where, rules)

    def shape(self, rules: Rules) -> Doc:
        """One object per kind, narrower than what busbar takes where a rule cannot be
        written as a schema (the templates' placeholders, the address policy, `user`
        with `password`): the description says the rest."""
        return {"oneOf": [_kind_shape(kind, rules) for kind in KINDS.values()]}


def _kind_shape(kind: Kind, rules: Rules) -> Doc:
    schemes = kind.schemes if rules.allow_http else kind.schemes[:1]
    name: Doc = {"type": "string", "pattern": f"^{NAME.pattern}$"}
    word = "[A-Za-z0-9_-]+"
    properties: Doc = {
        "type": {"type": "string", "enum": [kind.name]},
        kind.named("url"): {"type": "string", "maxLength": MAX_URL, "pattern": (
            f"^(?:{'|'.join(schemes)})://[A-Za-z0-9.-]+(?::[0-9]{{1,5}})?"
            + (QUEUE_PATH.pattern.replace("\\.", "[.]") if kind.path == "queue" else "")
            + "$")},
        kind.template: {"type": "string", "maxLength": MAX_SUBJECT,
                        "pattern": f"^{word}(?:\\.{word})*$"},
        kind.place: (
            {"type": "string", "pattern": f"^{EXCHANGE.pattern}$"}
            if kind.place == "exchange" else name
        ),
    }  # fmt: skip
    secret: Doc = {"type": "string", "minLength": 1, "maxLength": MAX_SECRET}
    if "token" in kind.secrets:
        properties["token"] = secret
    if kind.named("user") != "user":  # SQS's: required, so in the shape
        properties[kind.named("user")] = name
        properties[kind.named("password")] = secret
    required = ["type", *(f["name"] for f in kind.fields if f["required"])]
    return {"type": "object", "required": required, "additionalProperties": False,
            "properties": properties}  # fmt: skip
