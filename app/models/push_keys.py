"""The bus's key pairs that sign a JWT per push (a subscription's `auth: {"type":
"jwt"}`), and the JWKS a receiver verifies them against (GET /.well-known/jwks.json).

ES256 (ECDSA on P-256): short signatures, keys made in a millisecond, and what OIDC
verifiers and every JWT library take. A key pair is made by whichever web or worker
needs one first (push_keys.lua keeps the first that lands); its private key is sealed
in Redis (app/models/sealed.py) like every secret busbar holds, so a copy of Redis signs
nothing. A rotation makes a new pair current and keeps the former one published for
BUSBAR_SECRET_GRACE_S, as a signing secret's rotation does: a token signed before it
still verifies meanwhile.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from app.lua import Scripts
from app.lua.call import Call
from app.models.keys import Keys
from app.models.sealed import Sealer, resealed_in
from app.redis_client import text

if TYPE_CHECKING:  # the key functions import them at first use: most buses sign no push
    from cryptography.hazmat.primitives.asymmetric import ec

ALGORITHM = "ES256"


@dataclass(frozen=True)
class PushKey:
    kid: str
    private: ec.EllipticCurvePrivateKey


def place(kid: str) -> str:
    """A private key's place, the associated data of its seal."""
    return f"push key {kid}"


def new_entry(sealer: Sealer, now: int) -> tuple[str, str]:
    """A fresh key pair: its kid and its stored entry."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from jwt.algorithms import ECAlgorithm

    private = ec.generate_private_key(ec.SECP256R1())
    kid = os.urandom(8).hex()
    jwk: dict[str, Any] = ECAlgorithm.to_jwk(private.public_key(), as_dict=True)
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    jwk |= {"kid": kid, "alg": ALGORITHM, "use": "sig"}
    entry = {"jwk": jwk, "private": sealer.seal(pem, place(kid)), "created_at": now}
    return kid, json.dumps(entry, separators=(",", ":"))


def opened(sealer: Sealer, kid: str, entry: str) -> PushKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = sealer.open(json.loads(entry)["private"], place(kid))
    private = serialization.load_pem_private_key(pem.encode(), None)
    if not isinstance(private, ec.EllipticCurvePrivateKey):
        raise TypeError(f"push key {kid} is not an EC key")
    return PushKey(kid, private)


def resealed(raw: bytes, sealer: Sealer, kid: str) -> tuple[str, int]:
    """The entry with its private key sealed under the current key, and 1 if it was not."""
    return resealed_in(raw, "private", place(kid), sealer)


def _current(reply: Any) -> tuple[str, str]:
    return text(reply[0]), text(reply[1])


def call(
    keys: Keys, rotate: bool, kid: str, entry: str, now: int, grace_ms: int
) -> Call[tuple[str, str]]:
    """push_keys: the current key (installing this one when there is none, or with
    `rotate`, in any case); reads (kid, entry)."""
    args: list[object] = ["rotate" if rotate else "current", kid, entry, now, now + grace_ms]
    return Call("push_keys", [keys.push_keys], args, _current)


class PushKeys:
    """The web's side: the JWKS and a rotation (root's POST /push-keys/rotate)."""

    def __init__(self, client: redis.Redis, keys: Keys, scripts: Scripts, sealer: Sealer) -> None:
        self._redis, self._keys, self._scripts, self._sealer = client, keys, scripts, sealer

    def current(self, now: int) -> str:
        """The current kid, made now if there is none."""
        return self.signing(now).kid

    def signing(self, now: int) -> PushKey:
        """The current key, opened (made now if there is none)."""
        kid, entry = new_entry(self._sealer, now)
        kid, entry = self._scripts.run(call(self._keys, False, kid, entry, now, 0))
        return opened(self._sealer, kid, entry)

    def rotate(self, now: int, grace_s: int) -> tuple[str, str]:
        """(the new kid, the former one), the former published grace_s more."""
        former = self.current(now)
        kid, entry = new_entry(self._sealer, now)
        self._scripts.run(call(self._keys, True, kid, entry, now, grace_s * 1000))
        return kid, former

    def _stored(self) -> dict[str, str]:
        return {text(k): text(v) for k, v in self._redis.hgetall(self._keys.push_keys).items()}

    def jwks(self, now: int) -> dict[str, list[dict[str, Any]]]:
        """The current key and those in their grace, newest first; never a private key.
        A plain read (a public endpoint's): a key is made only when there is none."""
        stored = self._stored()
        if "current" not in stored:
            self.current(now)
            stored = self._stored()
        found = []
        for field, value in stored.items():
            kid = field.removeprefix("key:")
            if field == kid:
                continue
            until = stored.get(f"retire:{kid}")
            if until is None or int(until) > now:
                entry = json.loads(value)
                found.append((entry["created_at"], entry["jwk"]))
        return {"keys": [jwk for _, jwk in sorted(found, key=lambda f: -f[0])]}
