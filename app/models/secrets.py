"""Subscribers' signing secrets: created at first subscribe, read by their client, rotated
with a grace period. Never stored: see the derivation below.

Redis holds a random salt per secret (fields `secret_salt`, and `previous_salt` with
`previous_until` during a rotation's grace, in the subscriber hash); the secret is
derived from the salt with BUSBAR_SECRET_KEY (default: the root key), which lives only
in the processes' environment. So a copy of Redis (a dump, a replica, a backup) holds no
secret: it takes that copy *and* the key. The derivation is NIST SP 800-108's KDF in
counter mode with HMAC-SHA256 as its PRF, one 256-bit block: a standard construction,
nothing invented.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

from app.errors import NotFound
from app.lua import Scripts
from app.models import subscriber_calls as calls
from app.models.keys import Keys

SECRET_PREFIX = "whsec_"
LABEL = b"busbar webhook signing secret"
SALT_BYTES = 16


def new_salt() -> str:
    """A fresh salt for a new secret: 128 random bits, hex (what Lua stores as is)."""
    return os.urandom(SALT_BYTES).hex()


def derived(key: bytes, label: bytes, context: bytes = b"") -> bytes:
    """SP 800-108 counter mode, one block: [i]_32 || Label || 0x00 || Context || [L]_32."""
    message = (1).to_bytes(4, "big") + label + b"\x00" + context + (256).to_bytes(4, "big")
    return hmac.new(key, message, hashlib.sha256).digest()


def secret_bytes(key: bytes, salt: str) -> bytes:
    return derived(key, LABEL, salt.encode())


def secret_text(key: bytes, salt: str) -> str:
    """The secret as a subscriber configures it: `whsec_` + base64 of its 32 bytes."""
    return SECRET_PREFIX + base64.b64encode(secret_bytes(key, salt)).decode()


@dataclass(frozen=True)
class Secret:
    secret: str
    previous_until: int | None  # ms: until then the rotated-out secret signs too

    def describe(self) -> dict[str, object]:
        return {"secret": self.secret, "previous_until": self.previous_until}


class SecretStore:
    def __init__(self, keys: Keys, scripts: Scripts, key: bytes) -> None:
        self._keys = keys
        self._scripts = scripts
        self._key = key

    def _run(self, token: str, rotate: bool, now: int, grace_ms: int) -> Secret:
        found = self._scripts.run(
            calls.secret(self._keys, token, rotate, new_salt(), now, grace_ms)
        )
        if found is None:
            raise NotFound("no subscription for this client")
        return Secret(secret_text(self._key, found.salt), found.previous_until)

    def get(self, token: str, now: int) -> Secret:
        """The current secret (made now for a subscriber from before secrets existed)."""
        return self._run(token, False, now, 0)

    def rotate(self, token: str, now: int, grace_s: int) -> Secret:
        """A new secret; the old one signs beside it for grace_s more seconds (a rotation
        during a grace drops the oldest: two secrets at most)."""
        return self._run(token, True, now, grace_s * 1000)
