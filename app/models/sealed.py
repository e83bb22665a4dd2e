"""Secrets a subscriber gives busbar to present to its callback (header values marked
secret; later, OAuth2 client secrets and private keys), sealed before Redis holds them.

A copy of Redis (a dump, a replica, a backup) must not hold a usable secret, as for the
signing secrets (app/models/secrets.py): a value is sealed with AES-256-GCM
(`cryptography`), under a key derived from BUSBAR_SECRET_KEY, which lives only in the
processes' environment, by NIST SP 800-108's KDF (secrets.secret_bytes) with a label of
its own. The associated data names where the value belongs (the subscriber and the
header), so a sealed value copied to another subscriber or field does not open.

Sealed text: `v1.<key id>.<base64url(nonce || ciphertext || tag)>`. The key id (8 hex
digits of the key's SHA-256) says which key sealed it, so a key can be rotated:
BUSBAR_SECRET_KEY_PREVIOUS lists former keys that still open what they sealed, and
`busbar secrets reseal` seals every stored value again under the current key
(docs/callback-auth.md).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from app.errors import BusbarError
from app.models.secrets import derived

LABEL = b"busbar secrets at rest"
VERSION = "v1"
NONCE_BYTES = 12


class Unsealable(BusbarError):
    """A stored value no configured key opens: sealed under a key not given (a rotation
    without BUSBAR_SECRET_KEY_PREVIOUS), or altered. Its text never holds the value."""


def key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:8]


class Sealer:
    """Seals under the current key; opens under it or any previous one."""

    def __init__(self, current: bytes, previous: Sequence[bytes] = ()) -> None:
        keys = [derived(k, LABEL) for k in (current, *previous)]
        self._current = keys[0]
        self._id = key_id(keys[0])
        self._by_id = {key_id(k): AESGCM(k) for k in reversed(keys)}

    @property
    def current_id(self) -> str:
        return self._id

    def seal(self, value: str, where: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = nonce + self._by_id[self._id].encrypt(nonce, value.encode(), where.encode())
        return f"{VERSION}.{self._id}.{base64.urlsafe_b64encode(sealed).decode()}"

    def open(self, text: str, where: str) -> str:
        """The value; Unsealable says which key failed and what to do. `where` is the
        associated data and holds a subscriber's token: it never goes into the message
        (the caller names the field, logs name the client)."""
        version, _, rest = text.partition(".")
        kid, _, body = rest.partition(".")
        cipher = self._by_id.get(kid)
        if version != VERSION or cipher is None:
            raise Unsealable(
                f"sealed under key id {kid or '?'}, which this process is not given "
                f"(its key is {self._id}): after a rotation, set BUSBAR_SECRET_KEY_PREVIOUS "
                "to the former key, then run busbar secrets reseal"
            )
        try:
            raw = base64.urlsafe_b64decode(body)
            return cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], where.encode()).decode()
        except (InvalidTag, ValueError):
            raise Unsealable(
                f"does not open under key id {kid}, though this process holds that key: it "
                "was sealed for another subscriber or field (copied in Redis), or busbar "
                "asked for it in the wrong place (a bug: please report it); giving the "
                "secret again seals it anew"
            ) from None

    def is_current(self, text: str) -> bool:
        return text.startswith(f"{VERSION}.{self._id}.")


def resealed_in(raw: bytes, name: str, place: str, sealer: Sealer) -> tuple[str, int]:
    """A JSON object's sealed field `name` sealed again under the current key (`busbar
    secrets reseal`): the object's new text, and 1 if it was sealed under another key."""
    found = json.loads(raw)
    if sealer.is_current(found[name]):
        return raw.decode(), 0
    found[name] = sealer.seal(sealer.open(found[name], place), place)
    return json.dumps(found, separators=(",", ":")), 1
