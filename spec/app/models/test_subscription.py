"""The subscription body: defaults, ranges and unknown keys."""

from __future__ import annotations

import re

import pytest

from app.errors import InvalidInput
from app.models.callback_policy import Policy
from app.models.fields import Rules
from app.models.subscription import SUBSCRIPTION, Callback, parse_subscription


def parse(body, allow_http=False):
    return parse_subscription(body, allow_http=allow_http)


def test_defaults():
    sub = parse({"topics": ["orders"], "callback": "https://s.test/in"})
    assert (sub.timeout, sub.max_events, sub.max_attempts, sub.uuid) == (500, 100, 0, None)
    assert sub.topics == ["orders"]


def test_everything_given():
    sub = parse(
        {"topics": [], "callback": "https://s.test/in", "uuid": "u-1", "timeout": 0, "max": 10_000,
         "max_attempts": 1000}
    )  # fmt: skip
    assert (sub.timeout, sub.max_events, sub.max_attempts, sub.uuid) == (0, 10_000, 1000, "u-1")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("x", "must be a JSON object"),
        ({"callback": "https://s.test/in"}, "topics is required"),
        ({"topics": []}, "callback is required"),
        ({"topics": "orders", "callback": "https://s.test/in"}, "topics must be a list"),
        ({"topics": {"orders": 1}, "callback": "https://s.test/in"}, "topics must be a list"),
        ({"topics": [], "callback": "http://s.test/in"}, "callback must be an https URL"),
        ({"topics": [], "callback": None}, "callback must be a string"),
        ({"topics": None, "callback": "https://s.test/in"}, "topics must be a list"),
        ({"topics": [], "callback": "https://s.test/in?x=1"}, "callback must not have a query"),
        ({"topics": [], "callback": "https://s.test/in", "timeout": -1}, "timeout must be between"),
        ({"topics": [], "callback": "https://s.test/in", "timeout": 3_600_001}, "timeout must be"),
        (
            {"topics": [], "callback": "https://s.test/in", "max": 0},
            "max must be between 1 and 10000",
        ),
        ({"topics": [], "callback": "https://s.test/in", "max": 10_001}, "max must be between"),
        ({"topics": [], "callback": "https://s.test/in", "max": "5"}, "max must be an integer"),
        (
            {"topics": [], "callback": "https://s.test/in", "max_attempts": 0},
            "max_attempts must be",
        ),
        (
            {"topics": [], "callback": "https://s.test/in", "max_attempts": 1001},
            "max_attempts must",
        ),
        ({"topics": [], "callback": "https://s.test/in", "uuid": "a:b"}, "uuid must be printable"),
        ({"topics": [], "callback": "https://s.test/in", "uuid": ""}, "uuid must be a string"),
        ({"topics": [], "callback": "https://s.test/in", "uuid": 5}, "uuid must be a string"),
        (
            {"topics": [], "callback": "https://s.test/in", "batch": 5},
            "unknown key(s) in subscription",
        ),
    ],
)
def test_bad_subscriptions(body, message):
    with pytest.raises(InvalidInput) as raised:
        parse(body)
    assert message in raised.value.message


def test_http_callback_when_allowed():
    assert parse({"topics": [], "callback": "http://s.test:9/in"}, allow_http=True).callback


@pytest.mark.parametrize(
    ("callback", "refused"),
    [
        ("https://[fe8D:0D2:fbFF:C:8a:4aab:C7F:5]#%", True),  # found by schemathesis
        ("https://[FEBF::1]/in", True),
        ("https://169.254.169.254/latest", True),
        ("https://[fe8:1::]/in", False),  # 0fe8: not link-local
        ("https://[fec0::1]/in", "internal"),  # site-local
        ("https://10.0.0.1:9/in", "internal"),
        ("https://127.1/in", "internal"),
        ("https://localhost/in", "internal"),
        ("https://[::1]/in", "internal"),
        ("https://8.8.8.8/in", False),
        ("https://s.test/in", False),
    ],
)
def test_the_published_schema_says_which_callbacks_are_refused(callback: str, refused: bool | str):
    """The OpenAPI document must not call valid what the server refuses: a callback
    written as a link-local or internal address matches the schema's `not`."""
    doc = Callback().openapi(Rules())
    assert re.search(doc["pattern"], callback)
    assert bool(re.search(doc["not"]["pattern"], callback)) is bool(refused)
    body = {"topics": ["orders"], "callback": callback}
    if refused:
        why = "link-local" if refused is True else "the bus's own host or an internal network"
        with pytest.raises(InvalidInput, match=why):
            parse_subscription(body, allow_http=False)
    else:
        assert parse_subscription(body, allow_http=False).callback == callback
    opened = Callback().openapi(Rules(callbacks=Policy(deny=())))["not"]["pattern"]
    assert not re.search(opened, "https://169.254.169.254/")  # BUSBAR_ALLOW_LINK_LOCAL_...


BASE = {"topics": ["orders"], "callback": "https://s.test/in"}


@pytest.mark.parametrize(
    ("name", "meaning"),
    [
        ("concurrency", "for the default"),
        ("event_ids", "for the default"),
        ("headers", "to keep the subscription's own, or give {} to remove them"),
        ("auth", 'to keep the subscription\'s own, or give {"type": "basic"} for the uuid'),
        ("client_cert", "to keep the subscription's own, or give {} to remove it"),
    ],
)
def test_a_null_for_a_field_of_busbars_own_is_refused_naming_it(name: str, meaning: str):
    with pytest.raises(InvalidInput) as raised:
        parse({**BASE, name: None})
    assert raised.value.message == f"{name}: null is not allowed; leave it out {meaning}"


def test_a_null_for_routemasters_fields_and_max_attempts_means_the_default():
    """Routemaster takes them, and GET /subscriptions lists max_attempts as null."""
    nulls = {"uuid": None, "timeout": None, "max": None, "max_attempts": None}
    sub = parse({**BASE, **nulls})
    assert (sub.timeout, sub.max_events, sub.max_attempts, sub.uuid) == (500, 100, 0, None)


def test_the_published_schema_says_which_fields_take_a_null():
    doc = SUBSCRIPTION.openapi(Rules())["properties"]
    assert {name for name, field in doc.items() if field.get("nullable")} == {
        "uuid", "timeout", "max", "max_attempts"
    }  # fmt: skip


NATS = {"type": "nats", "url": "tls://nats.example.com", "subject": "orders.{type}"}


def test_a_destination_takes_the_place_of_the_callback():
    sub = parse({"topics": ["orders"], "destination": NATS})
    assert sub.destination is not None and sub.destination.subject == "orders.{type}"
    assert sub.callback == "tls://nats.example.com:4222"  # what listings show as callback


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"callback": "https://s.test/in"}, "give either `callback` or `destination`, not both"),
        ({"headers": {"X-A": "1"}}, "headers is for an HTTP callback"),
        ({"auth": {"type": "jwt"}}, "auth is for an HTTP callback"),
        ({"client_cert": {}}, "client_cert is for an HTTP callback"),
    ],
)
def test_a_destination_refuses_what_only_a_callback_takes(extra: dict, message: str):
    with pytest.raises(InvalidInput, match=re.escape(message)):
        parse({"topics": ["orders"], "destination": NATS, **extra})


def test_neither_a_callback_nor_a_destination_is_refused_naming_both():
    with pytest.raises(InvalidInput, match="callback is required \\(or a `destination`"):
        parse({"topics": ["orders"]})
    with pytest.raises(InvalidInput, match="destination: null is not allowed"):
        parse({"topics": ["orders"], "destination": None})
