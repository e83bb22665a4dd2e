"""The brokers a destination may name, each as one Kind: its URL schemes and ports, the
names its fields take, and what GET /destination-types tells a form about them
(docs/destinations.md). app/models/destination.py checks a destination by its kind.

- `nats`: a NATS JetStream stream. `subject` is the template, `stream` the stream that
  must store each message; `user` and `password`, or a `token`.
- `rabbitmq`: a RabbitMQ exchange. `routing_key` is the template, `exchange` the
  exchange (`""`: the default exchange, whose routing key is a queue's name); the URL's
  path is the virtual host; `user` and `password`.
- `sqs`: an Amazon SQS queue, named by its `queue_url` in its `region`; `message_group`
  is the template of a FIFO queue's message group (`{key}` unless given); `endpoint`
  the API's address when it is not the queue URL's own (a VPC endpoint, a local SQS);
  `access_key_id` and `secret_access_key`, always: the worker's own AWS identity is
  never lent to a subscriber.

Inside busbar every kind's fields have the same names (app/models/destination.py's
Destination): `url`, `user` and `password` are SQS's `queue_url`, `access_key_id` and
`secret_access_key`, which only the API's names (`named`) and the listing show.
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
    # what the URL's path names: "" nothing, "vhost" RabbitMQ's virtual host, "queue"
    # an SQS queue (/account/name)
    path: str = ""
    template_default: str | None = None  # the template when none is given
    renamed: tuple[tuple[str, str], ...] = ()  # (busbar's name, the API's) where they differ

    @property
    def names(self) -> tuple[str, ...]:
        return ("type", *(f["name"] for f in self.fields))

    def named(self, name: str) -> str:
        """The API's name of busbar's field `name` (url, user, password, ...)."""
        return dict(self.renamed).get(name, name)


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
    path="vhost",
)  # fmt: skip

SQS = Kind(
    "sqs", ("https", "http"), {"https": 443, "http": 80}, "message_group", "region", True,
    ("password",),
    "an Amazon SQS queue: one message per event (sent ten to a SendMessageBatch), "
    "acknowledged when every entry succeeded; on a FIFO queue (.fifo) the event's id is "
    "the MessageDeduplicationId and message_group its MessageGroupId",
    (
        {"name": "queue_url", "required": True, "secret": False,
         "description": "the queue: https://host/account/name[.fifo] (plain http:// only "
         "where BUSBAR_ALLOW_HTTP is set)",
         "example": "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo"},
        {"name": "region", "required": True, "secret": False,
         "description": "the queue's region, which signs the requests", "example": "eu-west-1"},
        {"name": "message_group", "required": False, "secret": False,
         "description": f"a FIFO queue's message group: {_TEMPLATE}; {{key}} when not "
         "given (each key's events in order); unused by a standard queue",
         "example": "{key}"},
        {"name": "endpoint", "required": False, "secret": False,
         "description": "the SQS API's address when not the queue URL's host: "
         "https://host[:port]", "example": "https://vpce-1a2b.sqs.eu-west-1.vpce.amazonaws.com"},
        {"name": "access_key_id", "required": True, "secret": False,
         "description": "the AWS access key that may send to the queue",
         "example": "AKIAIOSFODNN7EXAMPLE"},
        {"name": "secret_access_key", "required": True, "secret": True,
         "description": "its secret; sealed at rest, never listed", "example": SECRET_EXAMPLE},
    ),
    path="queue", template_default="{key}",
    renamed=(("url", "queue_url"), ("user", "access_key_id"),
             ("password", "secret_access_key")),
)  # fmt: skip

KINDS = {kind.name: kind for kind in (NATS, RABBITMQ, SQS)}


def described_types() -> list[dict[str, Any]]:
    """GET /destination-types."""
    return [{"type": k.name, "description": k.description, "fields": list(k.fields)}
            for k in KINDS.values()]  # fmt: skip
