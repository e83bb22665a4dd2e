"""The worker's side of a JWT per push: `Authorization: Bearer <JWT>` for a subscription
with `auth: {"type": "jwt"}`, in place of the Basic uuid.

Claims: `iss` the bus's BUSBAR_PUBLIC_URL, `aud` the subscription's `audience` or else
its callback URL (as Google Pub/Sub's push tokens have the endpoint), `sub` the
subscriber's client name, `iat` and `exp` (PUSH_TOKEN_TTL_S later). Signed ES256 with
the bus's current push key (app/models/push_keys.py), its `kid` in the header, so any
JWT library verifies it against GET /.well-known/jwks.json.

A worker reads the current key at most every KEY_REFRESH_S (a rotation reaches every
worker within that; the former key stays published far longer), and mints a token per
(subscriber, audience) once per half its life, not per delivery.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from app.lua import AsyncScripts
from app.models import push_keys
from app.models.keys import Keys
from app.models.sealed import Sealer

PUSH_TOKEN_TTL_S = 300
KEY_REFRESH_S = 30.0
REMEMBERED = 4096


def mint(key: push_keys.PushKey, issuer: str, subscriber: str, audience: str, now: int) -> str:
    """One token: `now` in seconds. PyJWT (and the cryptography it loads) at first use:
    most buses sign no push, and every worker would load it at start."""
    import jwt

    claims = {"iss": issuer, "aud": audience, "sub": subscriber,
              "iat": now, "exp": now + PUSH_TOKEN_TTL_S}  # fmt: skip
    return jwt.encode(claims, key.private, push_keys.ALGORITHM, headers={"kid": key.kid})


class PushSigner:
    def __init__(
        self, keys: Keys, scripts: AsyncScripts, sealer: Callable[[], Sealer], issuer: str
    ) -> None:
        self._keys, self._scripts, self._make_sealer = keys, scripts, sealer
        self._issuer = issuer
        self._sealer: Sealer | None = None
        self._key: push_keys.PushKey | None = None
        self._key_at = 0.0
        self._minted: dict[tuple[str, str], tuple[str, int]] = {}

    async def _current(self, now_ms: int) -> push_keys.PushKey:
        if self._key is None or time.monotonic() - self._key_at > KEY_REFRESH_S:
            if self._sealer is None:
                self._sealer = self._make_sealer()
            kid, entry = push_keys.new_entry(self._sealer, now_ms)
            call = push_keys.call(self._keys, False, kid, entry, now_ms, 0)
            kid, entry = await self._scripts.run(call)
            if self._key is None or self._key.kid != kid:
                self._key = push_keys.opened(self._sealer, kid, entry)
                self._minted.clear()  # tokens of the former key: minted again
            self._key_at = time.monotonic()
        return self._key

    async def bearer(self, subscriber: str, audience: str, now_ms: int) -> str:
        """A token for one push to `audience` (Unsealable when the key does not open)."""
        key = await self._current(now_ms)
        now = now_ms // 1000
        found = self._minted.get((subscriber, audience))
        if found is not None and found[1] - now > PUSH_TOKEN_TTL_S // 2:
            return found[0]
        token = mint(key, self._issuer, subscriber, audience, now)
        if len(self._minted) >= REMEMBERED:
            self._minted.clear()
        self._minted[(subscriber, audience)] = (token, now + PUSH_TOKEN_TTL_S)
        return token
