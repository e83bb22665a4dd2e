"""A destination as POST /subscription will take it (app/models/destination.py): each
refusal a 400 naming the field and the rule; the secrets sealed for their subscriber,
listed only as set, never opened for another; a subject template that no event's
topic, type or key can widen."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.errors import InvalidInput
from app.models.callback_policy import LOOPBACK_OPEN
from app.models.destination import Destination, DestinationField, described, opened, parse
from app.models.fields import Rules
from app.models.sealed import Sealer, Unsealable

PRODUCTION = Rules()
DEV = Rules(allow_http=True, callbacks=LOOPBACK_OPEN)
SECRET = "p4ss-w0rd-never-listed"
SUBJECT = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")


def refused(value: object, rules: Rules = PRODUCTION) -> str:
    with pytest.raises(InvalidInput) as caught:
        parse(value, "destination", rules)
    return caught.value.message


def test_a_rabbitmq_destination_keeps_its_virtual_host_and_takes_no_token():
    given_ = {"type": "rabbitmq", "url": "amqps://mq.example.com/orders", "exchange": "",
              "routing_key": "orders.{key}", "user": "busbar", "password": SECRET}  # fmt: skip
    found = parse(given_, "destination", PRODUCTION)
    assert found == Destination("rabbitmq", "amqps://mq.example.com:5671/orders",
                                "orders.{key}", user="busbar", password=SECRET,
                                exchange="")  # fmt: skip
    assert parse({**given_, "url": "amqp://mq.example.com"}, "d", DEV).url == (
        "amqp://mq.example.com:5672"
    )
    assert "plain amqp:// needs BUSBAR_ALLOW_HTTP" in refused({**given_, "url": "amqp://a.b"})
    assert "unknown field 'token' for rabbitmq" in refused({**given_, "token": "t"})
    assert "unknown field 'subject' for rabbitmq" in refused({**given_, "subject": "s"})
    assert "must name a broker only" in refused({**given_, "url": "amqps://a.example/x/y"})
    assert "destination.exchange must be" in refused({**given_, "exchange": "a b"})
    sealer = Sealer(b"k" * 32)
    raw = found.stored(sealer, "tok", 7)
    assert opened(raw, sealer, "tok") == found
    assert described(raw) == {"type": "rabbitmq", "url": "amqps://mq.example.com:5671/orders",
                              "routing_key": "orders.{key}", "exchange": "", "user": "busbar",
                              "password": {"secret": True, "set_at": 7}}  # fmt: skip


def test_a_valid_destination_is_kept_with_the_brokers_port_written_out():
    given_ = {"type": "nats", "url": "tls://nats.example.com", "subject": "orders.{type}",
              "stream": "ORDERS", "user": "busbar", "password": SECRET}  # fmt: skip
    found = parse(given_, "destination", PRODUCTION)
    assert found == Destination("nats", "tls://nats.example.com:4222", "orders.{type}",
                                "ORDERS", "busbar", SECRET)  # fmt: skip
    assert parse({**given_, "url": "tls://nats.example.com:7422/"}, "d", PRODUCTION).url == (
        "tls://nats.example.com:7422"
    )


@pytest.mark.parametrize(
    ("value", "rules", "words"),
    [
        ("nats://x", PRODUCTION, "destination must be a JSON object"),
        ({"type": "kafka", "url": "tls://a.example:1", "subject": "s"}, PRODUCTION,
         "destination.type must be one of nats, rabbitmq"),
        ({"type": "nats", "url": "nats://a.example:1", "subject": "s"}, PRODUCTION,
         "plain nats:// needs BUSBAR_ALLOW_HTTP"),
        ({"type": "nats", "url": "https://a.example", "subject": "s"}, DEV,
         "destination.url must be tls://host:port or nats://host:port"),
        ({"type": "nats", "url": f"tls://u:{SECRET}@a.example", "subject": "s"}, PRODUCTION,
         "must not hold a user or password"),
        ({"type": "nats", "url": "tls://a.example/path", "subject": "s"}, PRODUCTION,
         "must name a broker only"),
        ({"type": "nats", "url": "tls://127.0.0.1:4222", "subject": "s"}, PRODUCTION,
         "internal network"),
        ({"type": "nats", "url": "tls://169.254.169.254", "subject": "s"}, DEV,
         "cloud metadata"),
        ({"type": "nats", "url": "tls://a.example:99999", "subject": "s"}, PRODUCTION,
         "is not a URL"),
        ({"type": "nats", "url": "tls://a.example", "subject": "orders.>"}, PRODUCTION,
         "'>' is no subject token"),
        ({"type": "nats", "url": "tls://a.example", "subject": "orders..x"}, PRODUCTION,
         "'' is no subject token"),
        ({"type": "nats", "url": "tls://a.example", "subject": "o.{data}"}, PRODUCTION,
         "unknown placeholder {data}"),
        ({"type": "nats", "url": "tls://a.example", "subject": "o.{key!r}"}, PRODUCTION,
         "a placeholder takes no format"),
        ({"type": "nats", "url": "tls://a.example", "subject": "o.{key"}, PRODUCTION,
         "unmatched brace"),
        ({"type": "nats", "url": "tls://a.example", "subject": "o.x*{key}"}, PRODUCTION,
         "may hold only"),
        ({"type": "nats", "url": "tls://a.example", "subject": "s", "user": "u"}, PRODUCTION,
         "`user` and `password` go together"),
        ({"type": "nats", "url": "tls://a.example", "subject": "s", "token": "t",
          "user": "u", "password": "p"}, PRODUCTION, "either `token`"),
        ({"type": "nats", "url": "tls://a.example", "subject": "s", "stream": "a b"},
         PRODUCTION, "destination.stream must be"),
        ({"type": "nats", "url": "tls://a.example", "subject": "s", "queue": "q"}, PRODUCTION,
         "unknown field 'queue'"),
    ],
)  # fmt: skip
def test_each_refusal_names_the_field_and_the_rule(value: object, rules: Rules, words: str):
    message = refused(value, rules)
    assert words in message
    assert SECRET not in message


def test_the_secrets_are_sealed_for_their_subscriber_and_listed_only_as_set():
    sealer = Sealer(b"k" * 32)
    destination = Destination("nats", "tls://a.example:4222", "o.{key}", None, "busbar", SECRET)
    raw = destination.stored(sealer, "tok-1", 1_700_000_000_000)
    assert SECRET not in raw
    assert opened(raw, sealer, "tok-1") == destination
    with pytest.raises(Unsealable):
        opened(raw, sealer, "tok-2")  # copied to another subscriber, it does not open
    with pytest.raises(Unsealable):
        opened(raw, Sealer(b"x" * 32), "tok-1")  # nor under another key
    listed = described(raw)
    assert listed == {"type": "nats", "url": "tls://a.example:4222", "subject": "o.{key}",
                      "user": "busbar",
                      "password": {"secret": True, "set_at": 1_700_000_000_000}}  # fmt: skip
    assert SECRET not in json.dumps(listed)
    token = Destination("nats", "tls://a.example:4222", "o", token=SECRET)
    assert SECRET not in json.dumps(described(token.stored(sealer, "tok-1", 5)))


def test_the_published_schema_holds_only_what_busbar_takes():
    nats, rabbitmq = DestinationField().shape(PRODUCTION)["oneOf"]
    assert nats["required"] == ["type", "url", "subject"]
    assert rabbitmq["required"] == ["type", "url", "exchange", "routing_key"]
    assert nats["properties"]["url"]["pattern"].startswith("^(?:tls)://")
    assert rabbitmq["properties"]["url"]["pattern"].startswith("^(?:amqps)://")
    assert "password" not in nats["properties"]  # it needs `user`: not a schema's rule
    assert "token" not in rabbitmq["properties"]
    example = {"type": "nats", "url": "tls://nats.example.com:4222", "subject": "orders.x"}
    assert parse(example, "destination", PRODUCTION).subject == "orders.x"
    dev = DestinationField().shape(DEV)["oneOf"]
    assert "nats" in dev[0]["properties"]["url"]["pattern"]
    assert "amqp" in dev[1]["properties"]["url"]["pattern"]


@given(st.text(), st.text(), st.one_of(st.none(), st.text()))
def test_no_topic_type_or_key_widens_the_subject(topic: str, type_: str, key: str | None):
    destination = Destination("nats", "tls://a.example:4222", "busbar.{topic}.{type}.{key}")
    subject = destination.subject_for(topic, type_, key)
    assert SUBJECT.fullmatch(subject)
    assert subject.count(".") == 3
    assert subject.startswith("busbar.")


def test_each_described_field_is_one_the_check_takes_and_its_example_passes():
    """GET /destination-types tells a form what to ask: the field names are the check's,
    the required ones are the ones it requires, and the examples together are valid."""
    from app.models.destination_types import described_types

    nats, rabbitmq = described_types()
    assert (nats["type"], rabbitmq["type"]) == ("nats", "rabbitmq")
    for kind in (nats, rabbitmq):
        example = {f["name"]: f["example"] for f in kind["fields"] if f["required"]}
        found = parse({"type": kind["type"], **example}, "destination", PRODUCTION)
        assert found.type == kind["type"] and found.url.startswith(("tls://", "amqps://"))
        everything = {f["name"]: f["example"] for f in kind["fields"] if f["name"] != "token"}
        parse({"type": kind["type"], **everything}, "destination", PRODUCTION)  # all valid
        for field in kind["fields"]:
            if field["required"]:  # left out, a 400 naming it
                less = {k: v for k, v in example.items() if k != field["name"]}
                with pytest.raises(InvalidInput, match=f"d.{field['name']} is required"):
                    parse({"type": kind["type"], **less}, "d", PRODUCTION)
    assert {f["name"] for f in nats["fields"] if f["secret"]} == {"password", "token"}
    assert {f["name"] for f in rabbitmq["fields"] if f["secret"]} == {"password"}
