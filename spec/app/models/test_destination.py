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
    nats, rabbitmq, sqs = DestinationField().shape(PRODUCTION)["oneOf"]
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
    assert sqs["required"] == ["type", "queue_url", "region", "access_key_id",
                               "secret_access_key"]  # fmt: skip
    queue = re.compile(sqs["properties"]["queue_url"]["pattern"])
    assert queue.match("https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo")
    assert not queue.match("https://sqs.eu-west-1.amazonaws.com/orders")
    assert not queue.match("http://sqs.eu-west-1.amazonaws.com/1/orders")


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

    nats, rabbitmq, sqs = described_types()
    assert (nats["type"], rabbitmq["type"], sqs["type"]) == ("nats", "rabbitmq", "sqs")
    for kind in (nats, rabbitmq, sqs):
        example = {f["name"]: f["example"] for f in kind["fields"] if f["required"]}
        found = parse({"type": kind["type"], **example}, "destination", PRODUCTION)
        assert found.type == kind["type"]
        assert found.url.startswith(("tls://", "amqps://", "https://"))
        everything = {f["name"]: f["example"] for f in kind["fields"] if f["name"] != "token"}
        parse({"type": kind["type"], **everything}, "destination", PRODUCTION)  # all valid
        for field in kind["fields"]:
            if field["required"]:  # left out, a 400 naming it
                less = {k: v for k, v in example.items() if k != field["name"]}
                with pytest.raises(InvalidInput, match=f"d.{field['name']} is required"):
                    parse({"type": kind["type"], **less}, "d", PRODUCTION)
    assert {f["name"] for f in nats["fields"] if f["secret"]} == {"password", "token"}
    assert {f["name"] for f in rabbitmq["fields"] if f["secret"]} == {"password"}


SQS = {"type": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/o.fifo",
       "region": "eu-west-1", "access_key_id": "AKIAIOSFODNN7EXAMPLE",
       "secret_access_key": SECRET}  # fmt: skip


def test_an_sqs_destination_names_its_queue_and_keys_and_its_secret_key_is_sealed():
    found = parse(SQS, "destination", PRODUCTION)
    assert found == Destination("sqs", SQS["queue_url"], "{key}", user="AKIAIOSFODNN7EXAMPLE",
                                password=SECRET, region="eu-west-1")  # fmt: skip
    assert found.fifo and not parse({**SQS, "queue_url": SQS["queue_url"][:-5]}, "d",
                                    PRODUCTION).fifo  # fmt: skip
    assert SECRET not in repr(found)  # a Destination in a log line shows no secret
    grouped = parse({**SQS, "message_group": "{topic}-{key}"}, "d", PRODUCTION)
    assert grouped.subject_for("orders", "created", "a/b") == "orders-a_b"
    sealer = Sealer(b"k" * 32)
    raw = found.stored(sealer, "tok-1", 1_700_000_000_000)
    assert SECRET not in raw
    assert described(raw) == {
        "type": "sqs", "queue_url": SQS["queue_url"], "message_group": "{key}",
        "region": "eu-west-1", "access_key_id": "AKIAIOSFODNN7EXAMPLE",
        "secret_access_key": {"secret": True, "set_at": 1_700_000_000_000},
    }  # fmt: skip
    assert opened(raw, sealer, "tok-1") == found
    with pytest.raises(Unsealable):
        opened(raw, sealer, "tok-2")
    via = parse({**SQS, "endpoint": "https://vpce-1.sqs.eu-west-1.vpce.amazonaws.com"}, "d",
                PRODUCTION)  # fmt: skip
    assert via.endpoint == "https://vpce-1.sqs.eu-west-1.vpce.amazonaws.com:443"
    assert described(via.stored(sealer, "tok-1", 1))["endpoint"] == via.endpoint
    assert opened(via.stored(sealer, "tok-1", 1), sealer, "tok-1") == via


@pytest.mark.parametrize(
    ("change", "names"),
    [
        ({"queue_url": "https://sqs.eu-west-1.amazonaws.com/orders"}, "queue_url"),
        ({"queue_url": "https://sqs.example.com/1/o?x=1"}, "queue_url"),
        ({"queue_url": "http://sqs.example.com/1/o"}, "needs BUSBAR_ALLOW_HTTP"),
        ({"queue_url": "https://127.0.0.1/1/o"}, "queue_url"),
        ({"queue_url": "https://k:s@sqs.example.com/1/o"}, "user or password"),
        ({"region": "eu west"}, "region"),
        ({"message_group": "{nope}"}, "unknown placeholder"),
        ({"endpoint": "https://vpce.example.com/path"}, "endpoint"),
        ({"endpoint": "https://169.254.169.254"}, "endpoint"),
        ({"secret_access_key": ""}, "secret_access_key"),
        ({"password": SECRET}, "unknown field 'password'"),
        ({"url": "https://sqs.example.com"}, "unknown field 'url'"),
    ],
)
def test_an_sqs_destination_is_refused_naming_its_field(change: dict[str, str], names: str):
    assert names in refused({**SQS, **change})


def test_an_sqs_destination_needs_both_keys():
    without = {k: v for k, v in SQS.items() if k != "access_key_id"}
    assert "destination.access_key_id is required for sqs" in refused(without)
