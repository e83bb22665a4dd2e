"""app/delivery/credentials.py: a partition resolves its subscriber's credentials, and a
secret that does not open is named by its field, never by the token it is sealed for."""

from __future__ import annotations

import json

import pytest

from app.delivery.callback import tls_context
from app.delivery.credentials import Credentials
from app.models import partitions
from app.models.callback_headers import Header
from app.models.sealed import Sealer, Unsealable
from app.services.sealed_headers import to_store

KEY = b"k" * 32
TOKEN = "tok-7f3e9a"


def stored_headers(sealer: Sealer) -> bytes:
    given = (Header("X-Api-Key", "s3cr3t", True), Header("X-Env", "prod", False))
    return to_store(given, None, sealer, TOKEN, 1).encode()


def test_every_partition_opens_its_subscribers_secrets():
    sealer = Sealer(KEY)
    raw = stored_headers(sealer)
    credentials = Credentials(sealer, lambda: tls_context(True))
    for pid in [TOKEN, partitions.pid(TOKEN, 16, 0), partitions.pid(TOKEN, 16, 15)]:
        own, identity = credentials.of(pid, raw, b"")
        assert own == {"X-Api-Key": "s3cr3t", "X-Env": "prod"} and identity is None


def test_a_secret_that_does_not_open_names_its_header_and_keys_not_the_token():
    raw = stored_headers(Sealer(b"o" * 32))
    with pytest.raises(Unsealable) as unknown:
        Credentials(Sealer(KEY), lambda: tls_context(True)).of(
            partitions.pid(TOKEN, 4, 1), raw, b""
        )
    assert unknown.value.message.startswith("header x-api-key: sealed under key id ")
    assert "BUSBAR_SECRET_KEY_PREVIOUS" in unknown.value.message
    moved = json.loads(raw)  # the same key, sealed for another subscriber
    moved[0][1] = json.loads(
        to_store((Header("X-Api-Key", "x", True),), None, Sealer(KEY), "other", 1)
    )[0][1]
    with pytest.raises(Unsealable) as elsewhere:
        Credentials(Sealer(KEY), lambda: tls_context(True)).of(
            TOKEN, json.dumps(moved).encode(), b""
        )
    for message in (unknown.value.message, elsewhere.value.message):
        assert TOKEN not in message and "altered" not in message and "s3cr3t" not in message
    assert "sealed for another subscriber or field" in elsewhere.value.message
