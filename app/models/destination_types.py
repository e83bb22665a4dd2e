"""The brokers a destination may name, each as one Kind: its URL schemes and ports, the
names its fields take, and what GET /destination-types tells a form about them
(docs/destinations.md). app/models/destination.py checks a destination by its kind.

- `nats`: a NATS JetStream stream. `subject` is the template, `stream` the stream that
  must store each message; `user` and `password`, or a `token`.
- `rabbitmq`: a RabbitMQ exchange. `routing_key` is the template, `exchange` the
  exchange (`""`: the default exchange, whose routing key is a queue's name); the URL's
  path is the virtual host; `user` and `password`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SECRET_EXAMPLE = "..."


@dataclass(frozen=True)
class Kind:
    name: str
    schemes: tuple[str, str]  # (the encrypted one a production bus takes, the plain one)
    ports: dict[str, int]  # by scheme, when the URL gives none
    template: str  # the field of the template: NATS's subject, AMQP's routing key
    place: str  # the field naming where it must land: a stream, an exchange
    place_required: bool
    secrets: tuple[str, ...]  # write-only fields
    description: str
    fields: tuple[dict[str, Any], ...]  # for GET /destination-types, in order

    @property
    def names(self) -> tuple[str, ...]:
        return ("type", *(f["name"] for f in self.fields))


_USER = {"name": "user", "required": False, "secret": False,
         "description": "with password", "example": "busbar"}  # fmt: skip
_PASSWORD = {"name": "password", "required": False, "secret": True,
             "description": "with user; sealed at rest, never listed",
             "example": SECRET_EXAMPLE}  # fmt: skip
_TEMPLATE = ("words between dots; {topic}, {type} and {key} take the event's, each one "
             "word of [A-Za-z0-9_-]")  # fmt: skip

NATS = Kind(
    "nats", ("tls", "nats"), {"tls": 4222, "nats": 4222}, "subject", "stream", False,
    ("password", "token"),
    "a NATS JetStream stream: one message per event, its id as Nats-Msg-Id, acknowledged "
    "on the stream's PubAck",
    (
        {"name": "url", "required": True, "secret": False,
         "description": "the broker: tls://host[:port] (plain nats:// only where "
         "BUSBAR_ALLOW_HTTP is set); no user:password@",
         "example": "tls://nats.example.com:4222"},
        {"name": "subject", "required": True, "secret": False,
         "description": f"the subject: {_TEMPLATE}", "example": "orders.{type}.{key}"},
        {"name": "stream", "required": False, "secret": False,
         "description": "the stream that must store each message (else a failed attempt, "
         "stream_mismatch)", "example": "ORDERS"},
        _USER, _PASSWORD,
        {"name": "token", "required": False, "secret": True,
         "description": "in place of user and password; sealed at rest, never listed",
         "example": SECRET_EXAMPLE},
    ),
)  # fmt: skip

RABBITMQ = Kind(
    "rabbitmq", ("amqps", "amqp"), {"amqps": 5671, "amqp": 5672}, "routing_key", "exchange",
    True, ("password",),
    "a RabbitMQ exchange: one persistent message per event, its id as message_id, "
    "published mandatory and acknowledged on the broker's confirm (unroutable: a failed "
    "attempt)",
    (
        {"name": "url", "required": True, "secret": False,
         "description": "the broker: amqps://host[:port][/vhost] (plain amqp:// only where "
         "BUSBAR_ALLOW_HTTP is set); no user:password@",
         "example": "amqps://rabbitmq.example.com:5671/orders"},
        {"name": "exchange", "required": True, "secret": False,
         "description": "the exchange; \"\" for the default one (the routing key is then a "
         "queue's name)", "example": "orders"},
        {"name": "routing_key", "required": True, "secret": False,
         "description": f"the routing key: {_TEMPLATE}", "example": "orders.{type}.{key}"},
        _USER, _PASSWORD,
    ),
)  # fmt: skip

KINDS = {kind.name: kind for kind in (NATS, RABBITMQ)}


def described_types() -> list[dict[str, Any]]:
    """GET /destination-types."""
    return [{"type": k.name, "description": k.description, "fields": list(k.fields)}
            for k in KINDS.values()]  # fmt: skip
