"""The bus's push-token keys on a real server: one current key whoever asks first, its
private half sealed, a rotation that keeps the former key published for its grace and
then drops it; tokens they sign verify with PyJWT against the published set."""

from __future__ import annotations

import jwt
import pytest

from app.models.push_keys import PushKeys, opened
from app.models.sealed import Sealer
from app.redis_client import text


@pytest.fixture
def store(redis_client, keys, scripts) -> PushKeys:
    return PushKeys(redis_client, keys, scripts, Sealer(b"k" * 32))


def test_one_current_key_its_private_half_sealed(store: PushKeys, redis_client, keys):
    first = store.current(1_000)
    assert store.current(2_000) == first  # whoever asks next finds it
    (jwk,) = store.jwks(3_000)["keys"]
    assert jwk["kid"] == first and jwk["alg"] == "ES256" and "d" not in jwk
    stored = redis_client.hgetall(keys.push_keys)
    assert b"PRIVATE KEY" not in b"".join(stored.values())
    assert text(stored[b"current"]) == first


def test_a_rotation_keeps_the_former_key_published_for_its_grace(
    store: PushKeys, redis_client, keys, scripts
):  # fmt: skip
    former = store.current(1_000)
    kid, was = store.rotate(2_000, grace_s=60)
    assert was == former and kid != former
    assert [k["kid"] for k in store.jwks(3_000)["keys"]] == [kid, former]  # newest first
    assert [k["kid"] for k in store.jwks(62_001)["keys"]] == [kid]  # its grace is over
    assert f"key:{former}".encode() in redis_client.hgetall(keys.push_keys)  # a read: kept
    store.current(62_001)  # the next key read drops it
    assert f"key:{former}".encode() not in redis_client.hgetall(keys.push_keys)

    entry = text(redis_client.hget(keys.push_keys, f"key:{kid}"))
    key = opened(Sealer(b"k" * 32), kid, entry)
    token = jwt.encode({"aud": "x", "sub": "s"}, key.private, "ES256", headers={"kid": kid})
    (jwk,) = store.jwks(62_001)["keys"]
    public = jwt.PyJWK(jwk).key
    assert jwt.decode(token, public, algorithms=["ES256"], audience="x")["sub"] == "s"
