"""The callback address policy: which addresses are refused, in which spellings, and
what the operator's allowlist opens (never the deny list's link-local and metadata)."""

from __future__ import annotations

import ipaddress
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.errors import InvalidInput
from app.models.callback_policy import LOOPBACK_OPEN, PRODUCTION, Policy, check_callback
from app.models.fields import Rules
from app.models.subscription import SUBSCRIPTION, parse_subscription
from config.settings import Settings


def refusal(address: str, policy: Policy = PRODUCTION, host: str = "") -> str | None:
    judged = policy.refusal(ipaddress.ip_address(address), host)
    return None if judged is None else str(judged)


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("169.254.169.254", "refused range 169.254.0.0/16"),
        ("::ffff:169.254.169.254", "169.254.169.254 is in the refused range 169.254.0.0/16"),
        ("fe80::1%eth0", "refused range fe80::/10"),
        ("fd00:ec2::254", "refused range fd00:ec2::254/128"),
        ("127.0.0.1", "internal range 127.0.0.0/8"),
        ("127.255.0.9", "internal range 127.0.0.0/8"),
        ("0.0.0.0", "internal range 0.0.0.0/8"),
        ("10.9.8.7", "internal range 10.0.0.0/8"),
        ("172.31.255.255", "internal range 172.16.0.0/12"),
        ("192.168.1.1", "internal range 192.168.0.0/16"),
        ("100.64.0.1", "internal range 100.64.0.0/10"),
        ("::1", "internal range ::1/128"),
        ("::", "internal range ::/128"),
        ("fc00::1", "internal range fc00::/7"),
        ("fdff::1", "internal range fc00::/7"),
        ("::ffff:127.0.0.1", "127.0.0.1 is in the internal range 127.0.0.0/8"),
        # IPv6 forms that carry an IPv4 address: the metadata address each way
        ("64:ff9b::a9fe:a9fe", "169.254.169.254 is in the refused range"),  # NAT64
        ("64:ff9b:1::a9fe:a9fe", "169.254.169.254 is in the refused range"),  # local NAT64
        ("2002:a9fe:a9fe::1", "169.254.169.254 is in the refused range"),  # 6to4
        ("::a9fe:a9fe", "169.254.169.254 is in the refused range"),  # IPv4-compatible
        ("::ffff:0:a9fe:a9fe", "169.254.169.254 is in the refused range"),  # translated
        ("2001:0:4136:e378:8000:63bf:5601:5601", "169.254.169.254 is in the refused range"),
        ("64:ff9b::7f00:1", "127.0.0.1 is in the internal range"),
        ("2002:0a00:0001::1", "10.0.0.1 is in the internal range"),
    ],
)
def test_refused_addresses(address: str, why: str):
    assert why in (refusal(address) or "")


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "169.253.255.255", "169.255.0.0", "172.15.255.255", "172.32.0.0",
     "100.63.255.255", "100.128.0.0", "11.0.0.1", "2001:4860:4860::8888",
     "64:ff9b::808:808", "2002:0808:0808::1", "2606:4700::1111"],
)  # fmt: skip
def test_public_addresses_are_called(address: str):
    assert refusal(address) is None


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1:6379/x",
        "https://127.1/",
        "https://0x7f000001/",
        "https://2130706433/",
        "https://0177.0.0.1/",
        "https://017700000001/",
        "https://0x7f.1/",
        "https://127.0.0.1./",
        "https://[::1]/",
        "https://[0:0:0:0:0:0:0:1]/",
        "https://[::ffff:127.0.0.1]/",
        "https://[::ffff:7f00:1]/",
        "https://0.0.0.0/",
        "https://0/",
        "https://[::]/",
        "https://10.0.0.1/",
        "https://172.16.0.1/",
        "https://192.168.0.1/",
        "https://100.64.0.1/",
        "https://[fc00::1]/",
        "https://[fd12:3456::1]/",
        "https://localhost:8443/internal",
        "https://LOCALHOST./",
        "https://api.localhost/",
        "https://[64:ff9b::7f00:1]/",
        "https://[2002:7f00:1::]/",
    ],
)
def test_every_spelling_of_an_internal_address_is_refused_at_subscribe(url: str):
    with pytest.raises(InvalidInput, match=r"^callback must not point at the bus's own host"):
        check_callback(url, "callback", PRODUCTION)
    assert "BUSBAR_CALLBACK_ALLOW" in _message(url)


def _message(url: str) -> str:
    try:
        check_callback(url, "callback", PRODUCTION)
    except InvalidInput as refused:
        return refused.message
    return ""


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
        "https://[64:ff9b::a9fe:a9fe]/",
        "https://[2002:a9fe:a9fe::]/",
        "https://[::169.254.169.254]/",
        "http://user@169.254.169.254:80/x",
    ],
)
def test_every_spelling_of_a_metadata_address_is_refused(url: str):
    with pytest.raises(InvalidInput, match=r"^callback must not point at a link-local"):
        check_callback(url, "callback", PRODUCTION)
    opened = Policy(allow=(ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")))
    with pytest.raises(InvalidInput, match="refused by BUSBAR_CALLBACK_DENY"):
        check_callback(url, "callback", opened)  # the allowlist never opens the deny list
    check_callback(url, "callback", Policy(deny=()))  # BUSBAR_ALLOW_LINK_LOCAL_CALLBACKS


@pytest.mark.parametrize(
    "url",
    ["https://metadata.google.internal/", "https://a.test/", "https://8.8.8.8/",
     "https://134744072/", "https://[2001:4860:4860::8888]/", "https://localhost.example.com/",
     "https://0xdead.example/"],
)  # fmt: skip
def test_names_and_public_addresses_pass(url: str):
    check_callback(url, "callback", PRODUCTION)


def test_the_allowlist_opens_ranges_and_names_the_operator_lists():
    policy = Policy.of(
        Settings.from_env(
            {"BUSBAR_CALLBACK_ALLOW": "10.20.0.0/16, fd00:1::/32, orders.internal, *.svc.local"}
        )
    )
    assert refusal("10.20.3.4", policy) is None
    assert "10.0.0.0/8" in (refusal("10.21.3.4", policy) or "")
    assert refusal("fd00:1::5", policy) is None
    assert refusal("10.99.0.1", policy, "orders.internal") is None  # by name: any address
    assert refusal("127.0.0.1", policy, "Orders.Internal.") is None
    assert refusal("10.99.0.1", policy, "a.b.svc.local") is None
    assert refusal("10.99.0.1", policy, "svc.local") is not None  # *. is for names below
    assert refusal("10.99.0.1", policy, "other.internal") is not None
    assert "refused range" in (refusal("169.254.169.254", policy, "orders.internal") or "")
    check_callback("https://10.20.0.1/in", "callback", policy)
    with pytest.raises(InvalidInput):
        check_callback("https://10.21.0.1/in", "callback", policy)


def test_the_deny_list_wins_over_the_allowlist():
    env = {"BUSBAR_CALLBACK_DENY": "10.1.0.0/16", "BUSBAR_CALLBACK_ALLOW": "10.0.0.0/8"}
    policy = Policy.of(Settings.from_env(env))
    assert refusal("10.2.0.1", policy) is None
    assert "refused range 10.1.0.0/16" in (refusal("10.1.0.1", policy) or "")


@pytest.mark.parametrize(
    ("raw", "error"),
    [("10.0.0.0/33", "BUSBAR_CALLBACK_ALLOW: expected"), ("bad name!", "expected"),
     ("*", "expected"), ("1.2.3", "expected")],
)  # fmt: skip
def test_a_bad_allowlist_stops_the_process(raw: str, error: str):
    from config.errors import ConfigError

    with pytest.raises(ConfigError, match=error):
        Settings.from_env({"BUSBAR_CALLBACK_ALLOW": raw})


def test_busbar_dev_opens_this_machine_only():
    assert refusal("127.0.0.1", LOOPBACK_OPEN) is None
    assert refusal("::1", LOOPBACK_OPEN) is None
    check_callback("https://localhost:9/in", "callback", LOOPBACK_OPEN)
    assert refusal("10.0.0.1", LOOPBACK_OPEN) is not None
    assert refusal("169.254.169.254", LOOPBACK_OPEN) is not None


def test_a_subscription_refuses_by_default_and_allows_when_told():
    body = {"topics": ["orders"], "callback": "https://169.254.169.254/in"}
    with pytest.raises(InvalidInput, match="BUSBAR_ALLOW_LINK_LOCAL_CALLBACKS"):
        parse_subscription(body, allow_http=False)
    sub = parse_subscription(body, allow_http=False, policy=Policy(deny=()))
    assert sub.callback == body["callback"]


@pytest.mark.parametrize(
    ("url", "network"),
    [("https://100.100.100.200/latest/meta-data/", "100.100.100.200/32"),  # Alibaba Cloud
     ("https://168.63.129.16/machine", "168.63.129.16/32")],  # Azure wire server
)  # fmt: skip
def test_the_default_deny_list_has_the_other_clouds_metadata_addresses(url: str, network: str):
    with pytest.raises(InvalidInput, match=f"is in {network}, refused by BUSBAR_CALLBACK_DENY"):
        check_callback(url, "callback", PRODUCTION)


def test_the_deny_list_is_the_operators():
    policy = Policy.of(Settings.from_env({"BUSBAR_CALLBACK_DENY": "8.8.0.0/16, fd00::/8"}))
    body = {"topics": ["orders"], "callback": "https://8.8.2.3/in"}
    with pytest.raises(InvalidInput, match=r"8\.8\.2\.3 is in 8\.8\.0\.0/16"):
        parse_subscription(body, allow_http=False, policy=policy)
    nothing = Settings.from_env({"BUSBAR_CALLBACK_DENY": "none"}).callback_deny
    assert nothing == ()


NOT = re.compile(SUBSCRIPTION.openapi(Rules())["properties"]["callback"]["not"]["pattern"])


@settings(max_examples=400, deadline=None)
@given(st.ip_addresses(), st.sampled_from(["https://{}/in", "https://{}:8443/", "https://{}"]))
def test_the_published_schema_never_calls_valid_an_address_the_server_refuses(address, form):
    """A fuzzer (or a client) reading GET /openapi.json is not told that a refused
    address is a valid callback: every refused one matches the schema's `not`."""
    host = f"[{address}]" if address.version == 6 else str(address)
    url = form.format(host)
    if PRODUCTION.refusal(address) is not None:
        assert NOT.search(url), url


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
