"""One request to a subscription's callback outside the queue (POST /subscription/test):
what a delivery sends, authenticated as a delivery is, so a subscriber can see its
receiver accept the bus before any event depends on it.

The request is the engine's own (app/delivery/callback.py: the callback policy judges
every address, the answer is read strictly and bounded), its body an empty batch `[]`
with `Busbar-Test: 1`, signed with the subscriber's secrets, with its own headers
(secrets opened here, never returned) and its Basic uuid, a JWT per push, or an OAuth2
access token. Nothing is queued, counted or written to the attempt log: it is a
question, not a delivery. With OAuth2, the test fetches a token of its own every time
(the bus-wide cache is the deliveries'): it tries the token endpoint and the
credentials as they are now, and a failure there is `auth_failed` with the reason.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.clock import now_ms
from app.delivery.answer import KEPT
from app.delivery.callback import CallbackClient, client_options, tls_context
from app.delivery.credentials import Credentials
from app.delivery.dialer import Dialer
from app.delivery.identities import Identity
from app.delivery.token_fetch import AuthFailed, fetch
from app.errors import CallbackRefused
from app.models import partitions
from app.models.attempt_result import UNSEALABLE
from app.models.callback_auth import stored_auth
from app.models.callback_policy import Policy
from app.models.destination import Destination, opened
from app.models.keys import owner
from app.models.oauth2 import opened_secret
from app.models.push_keys import PushKeys
from app.models.sealed import Sealer, Unsealable
from app.models.secrets import SALT_BYTES
from app.services import signing
from app.services.failure import reason
from app.services.push_tokens import mint
from config.settings import Settings

if TYPE_CHECKING:  # imported at the first broker's test: nats-py takes 0.1 s to import
    from app.delivery.broker_messages import Published

BODY = b"[]"
TEST_HEADER = "Busbar-Test"
# one trial at a time per web process: its event loop runs in the request's greenlet or
# thread, and two loops at once in one thread (gevent's greenlets) are not allowed
ONE_AT_A_TIME = threading.Lock()


@dataclass(frozen=True)
class Trial:
    status: int | None
    reason: str | None  # why no status came (app/services/failure.py's words)
    body: str  # the answer's first KiB, as text
    took_ms: int

    def describe(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "body": self.body,
                "took_ms": self.took_ms}  # fmt: skip


def as_delivered(token: str, fields: dict[str, str]) -> str:
    """Whom the test call asks as: the subscriber's first partition when it has several
    (`concurrency` > 1), as a delivery of that partition resolves its credentials."""
    return partitions.pid(token, int(fields.get("partitions") or 1), 0)


def request_headers(
    settings: Settings, fields: dict[str, str], token: str, keys: PushKeys, own: Mapping[str, str]
) -> tuple[dict[str, str], str | None]:
    """The headers a delivery of `[]` would carry now, with the subscription's `own`
    (Credentials.of), and its bearer token (None: the Basic uuid). Unsealable when the
    push key does not open."""
    now = now_ms()
    salts = [fields["secret_salt"]] if fields.get("secret_salt") else [os.urandom(SALT_BYTES).hex()]
    if fields.get("previous_salt") and int(fields.get("previous_until", "0")) > now:
        salts.append(fields["previous_salt"])
    batch = f"test-{os.urandom(6).hex()}"
    signed = signing.headers(settings.signing_key, salts, token, batch, now, now // 1000, BODY)
    headers = {**own, **signed, TEST_HEADER: "1"}
    auth = stored_auth(fields.get("auth"))
    if auth is None or auth["type"] != "jwt":
        return headers, None  # oauth2's token is fetched in _ask
    audience = auth.get("audience") or fields["callback"]
    key = keys.signing(now)
    return headers, mint(key, settings.public_url, fields.get("name", ""), audience, now // 1000)


def oauth_secret(
    fields: dict[str, str], token: str, sealer: Sealer
) -> tuple[dict[str, Any], str] | None:
    """An oauth2 subscription's stored auth and its secret opened (Unsealable if not)."""
    auth = stored_auth(fields.get("auth"))
    if auth is None or auth["type"] != "oauth2":
        return None
    return auth, opened_secret(sealer, auth, owner(token))


def attempt(
    settings: Settings, fields: dict[str, str], token: str, keys: PushKeys, sealer: Sealer
) -> Trial:
    """Ask the callback once, within BUSBAR_CONNECT_TIMEOUT and BUSBAR_TIMEOUT, with
    the headers, client certificate and token a delivery would resolve (Credentials,
    for the subscriber's first partition)."""
    started = time.monotonic()
    if fields.get("destination"):
        return _tried_destination(settings, fields["destination"], token, sealer, started)
    pid = as_delivered(token, fields)
    credentials = Credentials(sealer, lambda: tls_context(settings.callback_verify))
    try:
        own, identity = credentials.of(
            pid, fields.get("headers", "").encode(), fields.get("client_cert", "").encode()
        )
        headers, bearer = request_headers(settings, fields, token, keys, own)
        oauth = oauth_secret(fields, pid, sealer)
    except Unsealable as exc:
        return Trial(None, UNSEALABLE, exc.message, 0)
    with ONE_AT_A_TIME:
        try:
            status, body = asyncio.run(_ask(settings, fields, headers, bearer, identity, oauth))
            found = None
        except CallbackRefused:
            status, body, found = None, b"", "refused_address"
        except AuthFailed as exc:
            status, body, found = None, exc.message.encode(), "auth_failed"
        except Exception as exc:  # every way a request fails is an answer here too
            status, body, found = None, b"", reason(exc)
    took = int((time.monotonic() - started) * 1000)
    return Trial(status, found, body[:KEPT].decode("utf-8", "replace"), took)


def _tried_destination(
    settings: Settings, stored: str, token: str, sealer: Sealer, started: float
) -> Trial:
    """A broker's test call: its connection, credentials and stream checked, nothing
    published (NatsPublisher.probe); 200 when a delivery would be taken."""
    try:
        destination = opened(stored, sealer, token)
    except Unsealable as exc:
        return Trial(None, UNSEALABLE, exc.message, 0)
    with ONE_AT_A_TIME:
        probed = asyncio.run(_probe(settings, destination))
    took = int((time.monotonic() - started) * 1000)
    if probed.result.ok:
        return Trial(200, None, probed.note, took)
    return Trial(None, probed.result.text, probed.note, took)


async def _probe(settings: Settings, destination: Destination) -> Published:
    from app.delivery.destinations import publisher_for

    tls = tls_context(settings.callback_verify)
    dialer = Dialer(Policy.of(settings), tls, settings.connect_timeout)
    publisher = publisher_for(destination.type, dialer, lambda: tls, settings)
    try:
        return await publisher.probe(destination)
    finally:
        await publisher.close()


async def _ask(
    settings: Settings,
    fields: dict[str, str],
    headers: dict[str, str],
    bearer: str | None,
    identity: Identity | None,
    oauth: tuple[dict[str, Any], str] | None = None,
) -> tuple[int, bytes]:
    http = CallbackClient(**client_options(settings))
    try:
        if oauth is not None:
            config, secret = oauth
            got = await fetch(http, config, secret, identity, now_ms() // 1000, settings.timeout)
            bearer = got.access_token
        async with asyncio.timeout(settings.connect_timeout + settings.timeout):
            answer = await http.exchange(
                fields["callback"], BODY, {"Content-Type": "application/json", **headers},
                fields.get("uuid", ""), None, bearer, identity,
            )  # fmt: skip
        return answer.status, answer.body
    finally:
        await http.close()
