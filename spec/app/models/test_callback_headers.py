"""The `headers` of POST /subscription: what a subscriber may send, what is refused with
a message naming it, and what a listing shows of a secret (that it is set, and since)."""

from __future__ import annotations

import json

import pytest

from app.errors import InvalidInput
from app.models.callback_headers import MAX_HEADERS, Header, described
from app.models.subscription import parse_subscription

BODY = {"topics": ["orders"], "callback": "https://s.test/hook"}


def headers(value: object) -> tuple[Header, ...] | None:
    return parse_subscription({**BODY, "headers": value}, allow_http=False).headers


def test_plain_and_secret_values_and_a_secret_kept_as_stored():
    given = headers({"X-Tenant": "acme", "X-Api-Key": {"value": "k 1\tz", "secret": True},
                     "X-Old": {"secret": True}})  # fmt: skip
    assert given == (
        Header("X-Tenant", "acme"),
        Header("X-Api-Key", "k 1\tz", True),
        Header("X-Old", None, True),
    )
    assert parse_subscription(BODY, allow_http=False).headers is None  # not given: kept
    assert headers({}) == ()  # given empty: none


@pytest.mark.parametrize(
    "name",
    ["Host", "content-length", "Transfer-Encoding", "Connection", "Content-Type", "TE",
     "Authorization", "User-Agent", "webhook-signature", "Webhook-Id", "traceparent",
     "Busbar-Replay", "busbar-anything"],
)  # fmt: skip
def test_framing_identity_and_busbars_own_names_are_refused_by_name(name: str):
    with pytest.raises(InvalidInput, match=f"headers.{name} cannot be set"):
        headers({name: "x"})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"X-A": "line\r\nX-Injected: 1"}, "without line breaks"),
        ({"X-A": "nul\x00"}, "without line breaks"),
        ({"X-A": " padded"}, "printable ASCII"),
        ({"X-A": "é"}, "printable ASCII"),
        ({"X-A": ""}, "1 to 2048 characters"),
        ({"X-A": "v" * 2049}, "1 to 2048 characters"),
        ({"X-A": 7}, "must be a string"),
        ({"Bad Name": "v"}, "HTTP token"),
        ({"X:A": "v"}, "HTTP token"),
        ({"X-A": "v", "x-a": "w"}, "x-a is given twice"),
        ({f"X-{i}": "v" for i in range(MAX_HEADERS + 1)}, f"at most {MAX_HEADERS} headers"),
        ({f"X-{i}": "v" * 2000 for i in range(5)}, "at most 8192"),
        ({"X-A": {"value": "v", "secret": "yes"}}, "secret must be true or false"),
        ({"X-A": {"value": "v", "sealed": True}}, "unknown field 'sealed'"),
        ({"X-A": {"secret": False}}, "value is required"),
        (["X-A"], "must be a JSON object"),
    ],
)
def test_what_cannot_be_sent_is_a_400_naming_it(value: object, message: str):
    with pytest.raises(InvalidInput, match=message):
        headers(value)


def test_a_listing_shows_plain_values_and_only_that_a_secret_is_set():
    field = json.dumps([["X-Tenant", "acme", 0, 5], ["X-Api-Key", "v1.ab.SEALED", 1, 7]])
    shown = described(field)
    assert shown == {"X-Tenant": "acme", "X-Api-Key": {"secret": True, "set_at": 7}}
    assert "SEALED" not in json.dumps(shown)
    assert described(None) == {}
