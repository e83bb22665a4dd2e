"""The worker's OAuth2 tokens (app/delivery/token_source.py) on the engine's own clients,
a real Redis and a real token endpoint (authlib's server side), with a clock the test
moves: a token is fetched once and then served from memory, another worker takes it from
the bus-wide cache without asking the endpoint, a renewal that fails while the token is
still valid keeps it serving, an expired token with the endpoint down is AuthFailed
naming the answer, and after a 401 one new token serves every worker."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import redis

from app.delivery.token_fetch import AuthFailed
from app.delivery.token_source import TokenSource
from app.models.callback_auth import Auth
from app.models.callback_policy import LOOPBACK_OPEN
from app.models.keys import Keys
from app.models.oauth2 import OAuth2
from app.models.sealed import Sealer
from config.settings import Settings
from spec.app.delivery.driven import Driven
from spec.conftest import ROOT_KEY
from spec.integration.oauth_server import TokenServer, token_server

SEALER = Sealer(b"s" * 32)


@pytest.fixture
def tokens() -> Iterator[TokenServer]:
    with token_server(lifetime_s=60) as server:
        server.add("billing-api", "cs-1")
        yield server


def test_a_token_fetched_once_serves_every_worker_until_it_is_due(
    redis_client: redis.Redis, keys: Keys, tokens: TokenServer
):  # fmt: skip
    settings = Settings(redis_url="redis://unused", root_key=ROOT_KEY, timeout=5.0)
    driven = Driven(redis_client, keys, settings, policy=LOOPBACK_OPEN)  # the endpoint's
    now = [int(time.time() * 1000)]
    auth = Auth("oauth2", oauth2=OAuth2(tokens.url, "billing-api", "events", None,
                                         "client_secret", "cs-1"))  # fmt: skip
    raw = auth.stored(None, SEALER, "tok", now[0]).encode()
    assert "cs-1" not in raw.decode() and json.loads(raw)["kind"] == "client_secret"

    def source() -> TokenSource:
        return TokenSource(keys, driven.scripts, driven.http, lambda: SEALER, 5.0, lambda: now[0])

    one, two = source(), source()

    def bearer(of: TokenSource) -> str:
        return driven.loop.run_until_complete(of.bearer("tok", raw, None))

    try:
        first = bearer(one)
        assert tokens.requests == 1 and tokens.check(f"Bearer {first}") == "billing-api"
        assert bearer(one) == first and bearer(two) == first  # memory, then the cache
        assert tokens.requests == 1

        now[0] += 55_000  # due (a tenth of 60 s before it expires), still valid
        tokens.down = True
        assert bearer(one) == first  # the renewal failed: the former token serves on
        assert tokens.requests == 2

        now[0] += 6_000  # expired, and the endpoint still down
        with pytest.raises(AuthFailed, match=r"answered 503 \(temporarily_unavailable\)"):
            bearer(two)
        tokens.down = False
        second = bearer(two)
        assert second != first and tokens.check(f"Bearer {second}") == "billing-api"

        tokens.revoke_all("billing-api")  # the receiver answers 401 to both workers
        renewed = driven.loop.run_until_complete(one.renewed("tok", raw, None, second))
        again = driven.loop.run_until_complete(two.renewed("tok", raw, None, second))
        assert renewed == again != second  # one new token for both
        assert len(tokens.issued("billing-api")) == 3
    finally:
        driven.close()
