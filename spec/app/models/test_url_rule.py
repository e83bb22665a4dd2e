"""The URL rule is one regex, used by the validator and published in OpenAPI: what one
accepts the other accepts, in the cases that disagreed before and in generated ones."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.errors import InvalidInput
from app.models import validate
from app.models.callback_policy import PRODUCTION, check_callback
from app.models.event import EVENT
from app.models.fields import Rules
from app.models.subscription import SUBSCRIPTION


def published(field: str, *, allow_http: bool, shape=EVENT) -> re.Pattern[str]:
    return re.compile(shape.openapi(Rules(allow_http=allow_http))["properties"][field]["pattern"])


@pytest.mark.parametrize(
    "url",
    [
        "https://Shop.Example.COM/orders/1",  # an upper-case host
        "https://a.test/search/a+b",  # + in the path
        "https://a.test/ns:item:1",  # : in the path
        "https://a.test/" + "p" * 900,  # a path over 200 characters
        "https://a.test:8443/x#frag",
        "https://user:pw@a.test/x",
        "https://[2001:db8::1]:443/x",
        "https://[::ffff:10.0.0.1]/",
        "https://a.test",
    ],
)
def test_what_the_server_accepts_the_schema_allows(url: str):
    assert validate.url(url, "url", allow_http=False) == url
    assert published("url", allow_http=False).fullmatch(url)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://a.test/", "must be an https URL"),
        ("https://a.test/?q=1", "must not have a query string"),
        ("https://a.test/a b", "must not contain spaces"),
        ("https:///path", "must name a host"),
        ("https://bücher.test/", "is not a valid URL"),
        ("https://[1:2]/", "is not a valid URL"),
        ("https://a.test/" + "p" * 1024, "at most 1024 characters"),
    ],
)
def test_what_the_server_refuses_the_schema_refuses(url: str, message: str):
    with pytest.raises(InvalidInput, match=message):
        validate.url(url, "url", allow_http=False)
    pattern = published("url", allow_http=False)
    assert not (pattern.fullmatch(url) and len(url) <= validate.MAX_URL)


def test_the_published_schema_follows_the_servers_settings():
    assert not published("url", allow_http=False).fullmatch("http://a.test/")
    assert published("url", allow_http=True).fullmatch("http://a.test/")
    callback = published("callback", allow_http=False, shape=SUBSCRIPTION)
    assert not callback.fullmatch("https://u:p@a.test/")  # refused with its own message


@settings(max_examples=300, deadline=None)
@given(st.from_regex(validate.url_pattern(allow_http=True), fullmatch=True))
def test_every_url_the_schema_allows_the_server_takes(url: str):
    if len(url) <= validate.MAX_URL:
        assert validate.url(url, "url", allow_http=True) == url
        assert urlsplit(url).hostname  # what the callback policy reads: never raises
        callback = SUBSCRIPTION.openapi(Rules(allow_http=True))["properties"]["callback"]
        called_valid = re.search(callback["pattern"], url) and not re.search(
            callback["not"]["pattern"], url
        )
        if called_valid:
            check_callback(url, "callback", PRODUCTION)


@settings(max_examples=300, deadline=None)
@given(st.ip_addresses(v=6), st.booleans())
def test_every_ipv6_address_is_a_host(address: ipaddress.IPv6Address, exploded: bool):
    written = address.exploded if exploded else str(address)
    assert validate.url(f"https://[{written}]/in", "url", allow_http=False)
