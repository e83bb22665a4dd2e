"""Everything a request to a subscription's callback carries to prove itself, in one
place: the subscription's own headers (secrets opened), its TLS client identity, and the
token sent in place of the Basic uuid (a push token the bus signs, or an OAuth2 access
token, renewed once when the callback refuses it with a 401).

Credentials resolves the headers and the identity for both requests a callback meets, a
delivery and the test call (trial.attempt), so the test call cannot answer 204 while
deliveries fail. FlightCredentials adds the bearer for a delivery and makes its Request
(app/delivery/request.py). Secrets are sealed for the subscriber
(app/services/sealed_headers.py's and app/models/client_cert.py's `where`), not for a
partition: a partition's pid (`<token>#<n>.<p>`, `concurrency` > 1) resolves to its
subscriber's token here, once, for every credential (the OAuth2 token source does the
same: token_source.py).
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from app.clock import Clock
from app.delivery.callback import CallbackClient, tls_context
from app.delivery.flight import Flight
from app.delivery.identities import CertBook, Identity
from app.delivery.request import Request
from app.delivery.share import Share
from app.delivery.token_source import TokenSource
from app.lua import AsyncScripts
from app.models.callback_auth import stored_auth
from app.models.keys import Keys, owner
from app.models.sealed import Sealer
from app.services.push_tokens import PushSigner
from app.services.sealed_headers import HeaderBook, sealer_of
from config.settings import Settings

REMEMBERED = 4096  # stored auth fields a worker keeps parsed


class Credentials:
    """Opened once per stored content and kept (HeaderBook, CertBook)."""

    def __init__(
        self, sealer: Sealer | Callable[[], Sealer], tls: Callable[[], ssl.SSLContext]
    ) -> None:
        self._headers = HeaderBook(sealer)
        self._certs = CertBook(tls, lambda: self._headers.sealer)

    @property
    def sealer(self) -> Sealer:
        return self._headers.sealer

    def of(
        self, pid: str, headers: bytes, client_cert: bytes
    ) -> tuple[Mapping[str, str], Identity | None]:
        """The headers to send and the identity to present for a request of subscriber or
        partition `pid`; Unsealable (naming the field, never the token) when a secret
        does not open."""
        subscriber = owner(pid)
        return self._headers.of(subscriber, headers), self._certs.of(subscriber, client_cert)


class FlightCredentials:
    """A delivery's credentials: Credentials, and its bearer (`auth` jwt: a push token;
    `auth` oauth2: an access token, fetched over the identity on https)."""

    def __init__(
        self,
        keys: Keys,
        scripts: AsyncScripts,
        http: CallbackClient,
        settings: Settings,
        clock: Clock,
    ) -> None:
        sealer = functools.partial(sealer_of, settings)
        self._own = Credentials(sealer, functools.partial(tls_context, http.verify))
        self._signer = PushSigner(keys, scripts, sealer, settings.public_url)
        self._tokens = TokenSource(keys, scripts, http, sealer, settings.timeout, clock)
        self._clock = clock
        self._auths: dict[bytes, dict[str, Any]] = {}  # parsed once per stored content

    async def request(self, flight: Flight, share: Share | None = None) -> Request:
        """The attempt's Request; Unsealable when a secret does not open, AuthFailed when
        no OAuth2 token could be had, TokenPending or OriginBusy when one is on its way."""
        own, identity = self._own.of(flight.pid, flight.headers, flight.client_cert)
        return Request(flight, own, await self._bearer(flight, identity), identity, share)

    async def renewed(self, refused: Request) -> Request | None:
        """After the callback answered 401: the request again with a new OAuth2 token,
        fetched by one worker for the whole bus; None when its bearer was no OAuth2
        token (a 401 is then the callback's answer, as any other)."""
        flight = refused.flight
        if refused.bearer is None or self._auth(flight.auth).get("type") != "oauth2":
            return None
        bearer = await self._tokens.renewed(
            flight.pid, flight.auth, refused.identity, refused.bearer
        )
        return replace(refused, bearer=bearer)

    async def _bearer(self, flight: Flight, identity: Identity | None) -> str | None:
        auth = self._auth(flight.auth)
        kind = auth.get("type")
        if kind == "oauth2":
            return await self._tokens.bearer(flight.pid, flight.auth, identity)
        if kind != "jwt":
            return None
        audience = auth.get("audience") or flight.callback
        return await self._signer.bearer(flight.client, audience, self._clock())

    def _auth(self, raw: bytes) -> dict[str, Any]:
        """The stored auth, parsed once per content ({} for basic)."""
        found = self._auths.get(raw)
        if found is None:
            if len(self._auths) >= REMEMBERED:
                self._auths.clear()
            found = self._auths[raw] = stored_auth(raw) or {}
        return found
