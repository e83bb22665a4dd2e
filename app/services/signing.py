"""Standard Webhooks signatures on deliveries (https://www.standardwebhooks.com, v1).

HMAC-SHA256 over `<webhook-id>.<webhook-timestamp>.<body>` with each secret's bytes,
base64, `v1,` before it; several signatures, space-separated, while a rotated-out secret
is in its grace period. The secrets themselves come from app/models/secrets.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable

from app.models.secrets import secret_bytes


def headers(
    key: bytes, salts: Iterable[str], token: str, batch_id: str, created_at: int,
    timestamp: int, body: bytes,
) -> dict[str, str]:  # fmt: skip
    """The three Standard Webhooks headers of one attempt; `timestamp` is its time (s)."""
    msg_id = webhook_id(key, token, batch_id, created_at, body)
    secrets = [secret_bytes(key, salt) for salt in salts]
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secrets, msg_id, timestamp, body),
    }


def signature(secrets: Iterable[bytes], msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header: `v1,<base64>` per secret, space-separated."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(hmac.new(s, signed, hashlib.sha256).digest()).decode()
        for s in secrets
    )


def webhook_id(key: bytes, token: str, batch_id: str, created_at: int, body: bytes) -> str:
    """The same on every attempt of a batch whose content is unchanged, unique per
    subscriber and batch (and creation time, against a batch id reused after Redis lost
    writes). Keyed with BUSBAR_SECRET_KEY, so it tells nothing about the token, which a
    receiver must never be able to guess from it. The body is part of it because a failed
    batch waiting for its retry can change: a coalescing route replaces an event with a
    newer state, or events expire. A receiver that drops a webhook-id it has handled must
    then not drop the new content, so changed content is a new message with a new id."""
    head = f"webhook-id\n{token}\n{batch_id}\n{created_at}\n".encode()
    digest = hmac.new(key, head + body, hashlib.sha256).digest()
    return "msg_" + base64.b32encode(digest[:20]).decode().lower()
