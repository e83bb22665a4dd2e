"""The callback address policy: which addresses are refused, in which spellings."""

from __future__ import annotations

import pytest

from app.errors import InvalidInput
from app.models.callback_policy import check_callback, refused_network
from app.models.subscription import parse_subscription
from config.settings import Settings


@pytest.mark.parametrize(
    ("address", "network"),
    [
        ("169.254.169.254", "169.254.0.0/16"),
        ("169.254.0.1", "169.254.0.0/16"),
        ("::ffff:169.254.169.254", "169.254.0.0/16"),
        ("fe80::1", "fe80::/10"),
        ("fe80::1%eth0", "fe80::/10"),
        ("febf:ffff::1", "fe80::/10"),
        ("fd00:ec2::254", "fd00:ec2::254/128"),
    ],
)
def test_refused_addresses(address: str, network: str):
    assert str(refused_network(address)) == network


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "10.0.0.1", "192.168.1.1", "169.253.255.255", "169.255.0.0", "::1",
     "fec0::1", "fd00:ec2::253", "2001:db8::1"],
)  # fmt: skip
def test_allowed_addresses(address: str):
    assert refused_network(address) is None


@pytest.mark.parametrize(
    "url",
    [
        "https://169.254.169.254/latest/meta-data/",
        "https://2852039166/",  # one number
        "https://0xa9fea9fe/",  # one hex number
        "https://0251.0376.0251.0376/",  # octal parts
        "https://169.254.1/",  # short form: 169.254.0.1
        "https://[::ffff:a9fe:a9fe]/",
        "https://[fe80::1%25eth0]/",
        "http://user@169.254.169.254:80/x",
    ],
)
def test_every_spelling_a_resolver_takes_is_refused(url: str):
    with pytest.raises(InvalidInput, match=r"^callback must not point at a link-local"):
        check_callback(url, "callback", allow_link_local=False)
    check_callback(url, "callback", allow_link_local=True)


@pytest.mark.parametrize(
    "url", ["https://metadata.google.internal/", "https://a.test/", "https://127.0.0.1/"]
)
def test_names_and_ordinary_addresses_pass(url: str):
    check_callback(url, "callback", allow_link_local=False)


def test_a_subscription_refuses_by_default_and_allows_when_told():
    body = {"topics": ["orders"], "callback": "https://169.254.169.254/in"}
    with pytest.raises(InvalidInput, match="BUSBAR_ALLOW_LINK_LOCAL_CALLBACKS"):
        parse_subscription(body, allow_http=False)
    sub = parse_subscription(body, allow_http=False, allow_link_local=True)
    assert sub.callback == body["callback"]


@pytest.mark.parametrize(
    ("url", "network"),
    [("https://100.100.100.200/latest/meta-data/", "100.100.100.200/32"),  # Alibaba Cloud
     ("https://168.63.129.16/machine", "168.63.129.16/32")],  # Azure wire server
)  # fmt: skip
def test_the_default_deny_list_has_the_other_clouds_metadata_addresses(url: str, network: str):
    with pytest.raises(InvalidInput, match=f"is in {network}, refused by BUSBAR_CALLBACK_DENY"):
        check_callback(url, "callback", allow_link_local=False)


def test_the_deny_list_is_the_operators():
    refused = Settings.from_env({"BUSBAR_CALLBACK_DENY": "10.0.0.0/8, fd00::/8"}).callback_deny
    body = {"topics": ["orders"], "callback": "https://10.1.2.3/in"}
    with pytest.raises(InvalidInput, match=r"10\.1\.2\.3 is in 10\.0\.0\.0/8"):
        parse_subscription(body, allow_http=False, refused=refused)
    metadata = {"topics": ["orders"], "callback": "https://169.254.169.254/in"}
    assert parse_subscription(metadata, allow_http=False, refused=refused)  # no longer listed
    nothing = Settings.from_env({"BUSBAR_CALLBACK_DENY": "none"}).callback_deny
    assert nothing == ()


@pytest.mark.parametrize(
    "callback",
    ["https://user:hunter2@sub.test/in", "https://hunter2@sub.test/in", "https://:hunter2@sub.test/",
     "https://@sub.test/in"],
)  # fmt: skip
def test_a_callback_with_userinfo_is_refused_without_echoing_it(callback: str):
    with pytest.raises(InvalidInput) as refused:
        parse_subscription({"topics": ["orders"], "callback": callback}, allow_http=False)
    assert refused.value.message.startswith("callback must not hold a user or password")
    assert "subscription's uuid" in refused.value.message
    assert "hunter2" not in refused.value.message
