"""The TLS identities callbacks see: the bus's own client certificate
(BUSBAR_CLIENT_CERT/KEY) in the default context, and a subscription's own
(`client_cert`, app/models/client_cert.py) in a context made for it.

Python's ssl loads a certificate chain from files only; a subscription's key must not
touch a disk, so each is written to an anonymous memory file (memfd, Linux) that
`load_cert_chain` reads through /proc and that is gone once closed. A context is made
once per stored certificate and kept; connections made with it are kept apart from
other identities' (app/delivery/origins.py: an Origin names its identity), so a
connection a subscriber's certificate opened never carries another's request.
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import Callable
from typing import NamedTuple

from app.models.client_cert import where
from app.models.sealed import Sealer, Unsealable

REMEMBERED = 1024  # contexts kept (one per subscription with a certificate of its own)


class Identity(NamedTuple):
    name: str  # the certificate's SHA-256 fingerprint
    context: ssl.SSLContext


def load_pair(context: ssl.SSLContext, cert: str, key: str) -> None:
    """The chain and key into `context`, from memory."""
    files = []
    try:
        for name, text in (("cert", cert), ("key", key)):
            fd = os.memfd_create(f"busbar-client-{name}", os.MFD_CLOEXEC)
            files.append(fd)
            os.write(fd, text.encode())
        context.load_cert_chain(f"/proc/self/fd/{files[0]}", f"/proc/self/fd/{files[1]}")
    finally:
        for fd in files:
            os.close(fd)


class CertBook:
    """A subscription's stored certificate as an Identity, made once per content."""

    def __init__(self, base: Callable[[], ssl.SSLContext], sealer: Callable[[], Sealer]) -> None:
        self._base, self._make_sealer = base, sealer
        self._sealer: Sealer | None = None
        self._made: dict[tuple[str, bytes], Identity] = {}

    def of(self, token: str, raw: bytes) -> Identity | None:
        """None: the subscription has none (the bus's own applies). Unsealable when its
        key does not open."""
        if not raw:
            return None
        found = self._made.get((token, raw))
        if found is None:
            if self._sealer is None:
                self._sealer = self._make_sealer()
            stored = json.loads(raw)
            context = self._base()
            try:
                key = self._sealer.open(stored["key"], where(token))
            except Unsealable as exc:
                raise Unsealable(f"client certificate's key: {exc.message}") from None
            load_pair(context, stored["cert"], key)
            found = Identity(stored["fingerprint"], context)
            if len(self._made) >= REMEMBERED:
                self._made.clear()
            self._made[(token, raw)] = found
        return found
