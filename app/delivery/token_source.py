"""The worker's side of OAuth2 client credentials: an access token for each delivery of
a subscription whose `auth` is oauth2, fetched once for the whole bus.

A worker keeps each subscriber's token in memory until its refresh time (a tenth of its
life before it expires, at most REFRESH_BEFORE_MS), so a delivery costs no round trip.
Past that, it asks the bus-wide cache (oauth_token.lua): the stored token, or the claim
to fetch one. Only the worker holding the claim asks the token endpoint; the others use
the former token while it is still valid, or hold the attempt back a moment
(TokenPending) when there is none. A callback's 401 drops the token only if it is still
the cached one, so one refused token makes one new request, however many workers met it.
The token is sealed in Redis as the secrets are (app/models/sealed.py); one sealed under
a key this process cannot open is fetched again rather than failing a delivery.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable
from typing import Any

from app.clock import Clock, now_ms
from app.delivery.callback import CallbackClient
from app.delivery.identities import Identity
from app.delivery.token_fetch import fetch
from app.errors import RetryableError
from app.lua import AsyncScripts
from app.models import oauth_tokens
from app.models.keys import Keys, owner
from app.models.oauth2 import fingerprint, opened_secret, token_where
from app.models.oauth_tokens import Action, Cached
from app.models.sealed import Sealer, Unsealable

log = logging.getLogger(__name__)
REFRESH_BEFORE_MS = 60_000
WAIT_MS = 250  # an attempt held back while another worker fetches waits this, at most
REMEMBERED = 4096


class TokenPending(RetryableError):
    """Another worker is fetching the subscriber's first token: the attempt waits."""


def refresh_at(fetched_at: int, lifetime_s: int) -> tuple[int, int]:
    """When to fetch again and when the token expires (ms), counted from before the
    request went out, so the bus's idea of the expiry is never later than the server's."""
    expires = fetched_at + lifetime_s * 1000
    return expires - min(REFRESH_BEFORE_MS, lifetime_s * 100), expires


class TokenSource:
    def __init__(
        self,
        keys: Keys,
        scripts: AsyncScripts,
        http: CallbackClient,
        sealer: Callable[[], Sealer],
        timeout: float,
        clock: Clock = now_ms,
    ) -> None:
        self._keys, self._scripts, self._http = keys, scripts, http
        self._make_sealer = sealer
        self._sealer_made: Sealer | None = None
        self._timeout, self._clock = timeout, clock
        self._me = secrets.token_hex(8)  # this process, as the owner of a claim
        self._configs: dict[bytes, tuple[dict[str, Any], str]] = {}
        self._held: dict[tuple[str, str], tuple[str, str, int]] = {}  # token, sealed, refresh at

    @property
    def _sealer(self) -> Sealer:
        if self._sealer_made is None:
            self._sealer_made = self._make_sealer()
        return self._sealer_made

    def config(self, raw: bytes) -> tuple[dict[str, Any], str]:
        """The stored auth and its fingerprint, parsed once per content."""
        found = self._configs.get(raw)
        if found is None:
            if len(self._configs) >= REMEMBERED:
                self._configs.clear()
            found = self._configs[raw] = (json.loads(raw), fingerprint(raw))
        return found

    async def bearer(self, token: str, raw: bytes, identity: Identity | None) -> str:
        """The access token for a delivery to the subscriber (`token`, or a partition's
        pid) whose stored auth is `raw`. AuthFailed, TokenPending or Unsealable (its
        secret does not open) when there is none to send."""
        sub = owner(token)
        _, fp = self.config(raw)
        held = self._held.get((sub, fp))
        if held is not None and held[2] > self._clock():
            return held[0]
        call = oauth_tokens.get(self._keys, sub, self._clock(), fp, self._me)
        return await self._answered(sub, raw, identity, await self._scripts.run(call))

    async def renewed(self, token: str, raw: bytes, identity: Identity | None, refused: str) -> str:
        """After the callback answered 401 to `refused`: a new token, fetched by one
        worker only (the cache forgets `refused` only while it still holds it)."""
        sub = owner(token)
        _, fp = self.config(raw)
        self._held.pop((sub, fp), None)
        named = oauth_tokens.digest(refused)
        call = oauth_tokens.drop(self._keys, sub, self._clock(), fp, self._me, named)
        return await self._answered(sub, raw, identity, await self._scripts.run(call))

    async def _answered(
        self, sub: str, raw: bytes, identity: Identity | None, cached: Cached
    ) -> str:
        config, fp = self.config(raw)
        if cached.action is Action.TOKEN:
            try:
                return self._keep(sub, fp, cached.sealed, cached.refresh_at)
            except Unsealable:  # sealed under a key this process lacks: fetched again,
                # asking as for a configuration never stored (claims the fetch, or waits)
                call = oauth_tokens.get(self._keys, sub, self._clock(), "", self._me)
                cached = await self._scripts.run(call)
        if cached.action is not Action.FETCH:
            delay = max(1, min(WAIT_MS, cached.until - self._clock()))
            raise TokenPending("the OAuth2 token is being fetched by another worker", delay)
        now = self._clock()
        try:
            secret = opened_secret(self._sealer, config, sub)
            got = await fetch(self._http, config, secret, identity, now // 1000, self._timeout)
        except Exception:
            await self._scripts.run(oauth_tokens.release(self._keys, sub, now, fp, self._me))
            if cached.sealed and cached.until > self._clock():  # the former one serves on
                log.warning("an OAuth2 token was not renewed; the former one is used")
                return self._keep(sub, fp, cached.sealed, self._clock() + WAIT_MS)
            raise
        refresh, expires = refresh_at(now, got.lifetime_s)
        sealed = self._sealer.seal(got.access_token, token_where(sub))
        named = oauth_tokens.digest(got.access_token)
        put = oauth_tokens.put(self._keys, sub, self._clock(), fp, self._me, sealed, refresh,
                               expires, named)  # fmt: skip
        await self._scripts.run(put)
        self._remember(sub, fp, (got.access_token, sealed, refresh))
        return got.access_token

    def _keep(self, sub: str, fp: str, sealed: str, refresh: int) -> str:
        access = self._sealer.open(sealed, token_where(sub))
        self._remember(sub, fp, (access, sealed, refresh))
        return access

    def _remember(self, sub: str, fp: str, held: tuple[str, str, int]) -> None:
        if len(self._held) >= REMEMBERED:
            self._held.clear()
        self._held[(sub, fp)] = held
