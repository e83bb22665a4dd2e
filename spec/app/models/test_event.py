"""Event validation: every rule of the API, each rejection naming its field."""

from __future__ import annotations

import pytest

from app.errors import InvalidInput
from app.models.event import EVENT, parse_event, parse_events
from app.models.fields import Rules

NOW = 1_700_000_000_000


def parse(raw, allow_http=False, max_data=64):
    return parse_event(raw, now_ms=NOW, allow_http=allow_http, max_data=max_data)


def test_a_full_event():
    e = parse({"type": "update", "url": "https://a.test/o/1", "timestamp": 5, "data": {"x": 1}})
    assert (e.type, e.url, e.t, e.data) == ("update", "https://a.test/o/1", 5, {"x": 1})


@pytest.mark.parametrize("timestamp", [None, "absent"])
def test_missing_or_null_timestamp_is_reception_time(timestamp):
    raw = {"type": "create", "url": "https://a.test/1"}
    if timestamp is None:
        raw["timestamp"] = None  # what the Ruby routemaster-client sends
    assert parse(raw).t == NOW


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "must be a JSON object"),
        ({"url": "https://a.test/1"}, "type must be one of"),
        ({"type": "created", "url": "https://a.test/1"}, "type must be one of"),
        ({"type": "create"}, "url is required"),
        ({"type": "create", "url": 5}, "url must be a string"),
        ({"type": "create", "url": "http://a.test/1"}, "url must be an https URL"),
        ({"type": "create", "url": "ftp://a.test/1"}, "url must be an https URL"),
        ({"type": "create", "url": "https:///path"}, "url must name a host"),
        ({"type": "create", "url": "https://a.test/1?x=1"}, "query string"),
        ({"type": "create", "url": "https://a.test/1?"}, "query string"),
        ({"type": "create", "url": "https://a.test/" + "a" * 1010}, "at most 1024"),
        ({"type": "create", "url": "https://a.test/a b"}, "spaces"),
        ({"type": "create", "url": "https://[::1/"}, "not a valid URL"),
        (
            {"type": "create", "url": "https://a.test/1", "timestamp": "now"},
            "timestamp must be an integer",
        ),
        (
            {"type": "create", "url": "https://a.test/1", "timestamp": 1.5},
            "timestamp must be an integer",
        ),
        (
            {"type": "create", "url": "https://a.test/1", "timestamp": True},
            "timestamp must be an integer",
        ),
        ({"type": "create", "url": "https://a.test/1", "timestamp": -1}, "timestamp must be"),
        ({"type": "create", "url": "https://a.test/1", "data": [1]}, "data must be a JSON object"),
        ({"type": "create", "url": "https://a.test/1", "data": "x"}, "data must be a JSON object"),
        (
            {"type": "create", "url": "https://a.test/1", "data": {"x": "y" * 80}},
            "bytes of msgpack",
        ),
        (
            {"type": "create", "url": "https://a.test/1", "topic": "x"},
            "unknown key(s) in event: topic",
        ),
    ],
)
def test_rejections_name_the_field(raw, message):
    with pytest.raises(InvalidInput) as raised:
        parse(raw)
    assert message in raised.value.message


def test_http_only_when_allowed():
    assert (
        parse({"type": "noop", "url": "http://a.test/1"}, allow_http=True).url == "http://a.test/1"
    )


def test_url_of_exactly_1024_characters_is_fine():
    url = "https://a.test/" + "a" * (1024 - len("https://a.test/"))
    assert parse({"type": "create", "url": url}).url == url


def test_data_limit_is_configurable():
    raw = {"type": "create", "url": "https://a.test/1", "data": {"x": "y" * 80}}
    assert parse(raw, max_data=1000).data == {"x": "y" * 80}


def test_a_bulk_rejection_says_which_event():
    body = [{"type": "create", "url": "https://a.test/1"}, {"type": "create", "url": "nope"}]
    with pytest.raises(InvalidInput) as raised:
        parse_events(body, now_ms=NOW, allow_http=False, max_data=64)
    assert raised.value.message.startswith("event 1: url")


ONE = {"type": "create", "url": "https://a.test/1"}


def test_a_null_key_is_refused_naming_it():
    """busbar's own field: a null there is no default anyone asked for."""
    with pytest.raises(InvalidInput) as raised:
        parse_events([ONE, {**ONE, "key": None}], now_ms=NOW, allow_http=False, max_data=64)
    assert raised.value.message == (
        "event 1: key: null is not allowed; leave it out to order by the url"
    )


def test_a_null_data_is_no_data_as_in_routemaster():
    assert parse({**ONE, "data": None}).data is None


def test_the_published_schema_says_which_fields_take_a_null():
    doc = EVENT.openapi(Rules())["properties"]
    assert {n for n, f in doc.items() if f.get("nullable")} == {"timestamp", "data"}
