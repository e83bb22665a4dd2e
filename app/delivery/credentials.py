"""What a request to a subscription's callback carries besides its batch and signature:
the subscription's own headers (secrets opened) and its TLS client identity.

One resolver for both requests a callback meets, a delivery (steps.AsyncDelivery.send)
and the test call (trial.attempt), so the test call cannot answer 204 while deliveries
fail. Secrets are sealed for the subscriber (app/services/sealed_headers.py's and
app/models/client_cert.py's `where`), not for a partition: a partition's pid
(`<token>#<n>.<p>`, `concurrency` > 1) resolves to its subscriber's token here, once,
for every credential (the OAuth2 token source does the same: token_source.py).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping

from app.delivery.identities import CertBook, Identity
from app.models.keys import owner
from app.models.sealed import Sealer
from app.services.sealed_headers import HeaderBook


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
