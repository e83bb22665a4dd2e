"""The worker's start-up check of stored subscriptions against the callback policy: the
subscribers whose callback is now refused are found and named by client name."""

from __future__ import annotations

import logging

import pytest
import redis

from app.lua import Scripts
from app.models.callback_policy import LOOPBACK_OPEN, PRODUCTION, Policy
from app.models.keys import Keys
from app.models.subscribers import SubscriberStore
from app.models.subscription import parse_subscription
from app.models.tokens import TokenStore
from app.services.refused_callbacks import name_refused, refused_subscriptions


def _subscribe(client: redis.Redis, keys: Keys, scripts: Scripts, name: str, callback: str):
    token = f"{name}-token-secret"
    TokenStore(client, keys).create(name, token)
    body = {"topics": ["orders"], "callback": callback}
    sub = parse_subscription(
        body,
        allow_http=True,
        policy=Policy(deny=(), allow=(*LOOPBACK_OPEN.allow, "nine.internal")),
    )
    SubscriberStore(client, keys, scripts).subscribe(token, sub, 0)


def test_the_refused_are_found_and_named_by_client(
    redis_client: redis.Redis, keys: Keys, scripts: Scripts, caplog: pytest.LogCaptureFixture
):
    _subscribe(redis_client, keys, scripts, "billing", "http://127.0.0.1:9/in")
    _subscribe(redis_client, keys, scripts, "metadata", "http://169.254.169.254/in")
    _subscribe(redis_client, keys, scripts, "public", "https://8.8.8.8/in")
    _subscribe(redis_client, keys, scripts, "named", "https://nine.internal/in")
    found = refused_subscriptions(redis_client, keys, PRODUCTION)
    assert {(r.client, r.host, r.refusal.denied) for r in found} == {
        ("billing", "127.0.0.1", False),
        ("metadata", "169.254.169.254", True),
    }  # a name is judged at delivery, by what it resolves to then
    assert refused_subscriptions(redis_client, keys, LOOPBACK_OPEN)[0].client == "metadata"
    with caplog.at_level(logging.WARNING):
        assert name_refused(redis_client, keys, PRODUCTION) == 2
    text = caplog.text
    assert "subscriber billing: callback host 127.0.0.1 is refused" in text
    assert "BUSBAR_CALLBACK_ALLOW" in text and "BUSBAR_ALLOW_LINK_LOCAL_CALLBACKS" in text
    assert "token-secret" not in text
