"""Receiving busbar's deliveries, whatever the framework: check who sent a request, that
it is fresh and not a replay, parse it into typed events; the WSGI and ASGI adapters
(busbar_client.wsgi, busbar_client.asgi) call the user's function between `admit` and
`settle`, and answer 2xx only once it has returned.

Checks, in order:
- `uuid` given: the HTTP Basic user must be it (Routemaster's check; busbar still sends it).
- `secret` given (one, or several while you move to a rotated one): the Standard Webhooks
  headers must be there, `webhook-timestamp` within `tolerance` seconds of now (either
  way), and the signature must verify, by the reference implementation
  (`standardwebhooks`) with one of the secrets: else 401, and the function is not called.
- A `webhook-id` already handled within the tolerance is not handed to the function
  again: answered 200 (it is busbar retrying after your answer was lost, or a replay),
  and 409 while the first copy is still being handled. One that failed (the function
  raised) is forgotten, so busbar's retry runs it again.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from standardwebhooks import Webhook, WebhookVerificationError

from busbar_client.models import Batch, Event

MAX_TOLERANCE = 300  # seconds: the window `standardwebhooks` itself enforces
MAX_BODY = 16 * 1024 * 1024


@dataclass(frozen=True)
class Reply:
    """An answer to send: status and a short JSON body (None: no body)."""

    status: int
    error: str | None = None

    def body(self) -> bytes:
        return b"" if self.error is None else json.dumps({"error": self.error}).encode()


class ReplayGuard:
    """webhook-ids handled or being handled, each kept for `tolerance` after the later of
    its timestamp and its arrival: a replay with that timestamp passes the freshness
    check only until then. In memory, per process: receivers behind several processes
    pass a shared one (same three methods over Redis, a database...)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: dict[str, float] = {}
        self._busy: set[str] = set()
        self._added = 0

    def begin(self, msg_id: str, now: float) -> str:
        """'new' (now being handled), 'done' or 'busy'."""
        with self._lock:
            if msg_id in self._busy:
                return "busy"
            if self._done.get(msg_id, 0) > now:
                return "done"
            self._busy.add(msg_id)
            return "new"

    def finish(self, msg_id: str, keep_until: float, ok: bool) -> None:
        with self._lock:
            self._busy.discard(msg_id)
            if ok:
                self._done[msg_id] = keep_until
                self._added += 1
                if self._added % 1000 == 0:
                    now = time.time()
                    self._done = {k: v for k, v in self._done.items() if v > now}


class Receiver:
    def __init__(
        self,
        handler: Callable[[Batch], object],
        *,
        secret: str | Sequence[str] | None = None,
        uuid: str | None = None,
        tolerance: int = MAX_TOLERANCE,
        guard: ReplayGuard | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        secrets = [secret] if isinstance(secret, str) else list(secret or [])
        if not secrets and uuid is None:
            raise ValueError("give the subscriber's secret (signatures) or uuid (Basic user)")
        if not 0 < tolerance <= MAX_TOLERANCE:
            raise ValueError(f"tolerance must be 1 to {MAX_TOLERANCE} seconds")
        self.handler = handler
        self._webhooks = [Webhook(s) for s in secrets]
        self._uuid = uuid
        self._tolerance = tolerance
        self._guard = guard or ReplayGuard()
        self._clock = clock

    def admit(self, headers: Mapping[str, str], body: bytes) -> Batch | Reply:
        """The batch to hand to the function, or the answer that refuses it. Header names
        are matched in any case."""
        lower = {k.lower(): v for k, v in headers.items()}
        if self._uuid is not None and not self._user_matches(lower.get("authorization", "")):
            return Reply(401, "the Basic user is not this subscriber's uuid")
        msg_id, stamp = lower.get("webhook-id"), lower.get("webhook-timestamp")
        now = self._clock()
        if self._webhooks:
            refused = self._refuse_signature(lower, body, now)
            if refused:
                return refused
        try:
            raw = json.loads(body)
            if not isinstance(raw, list):
                raise ValueError("the body must be a JSON array of events")
            events = tuple(Event.from_json(e) for e in raw)
        except ValueError as exc:
            return Reply(400, f"not a busbar delivery: {exc}")
        timestamp = int(stamp) if stamp and stamp.isdigit() else None
        if msg_id:
            state = self._guard.begin(msg_id, now)
            if state == "done":
                return Reply(200)
            if state == "busy":
                return Reply(409, "this webhook-id is being handled")
        return Batch(events, msg_id, timestamp, lower.get("traceparent"))

    def settle(self, batch: Batch, ok: bool) -> Reply:
        """After the function: 204 if it returned, 500 if it raised (busbar retries)."""
        if batch.webhook_id:
            now = self._clock()
            keep = max(now, float(batch.timestamp or 0)) + self._tolerance
            self._guard.finish(batch.webhook_id, keep, ok)
        return Reply(204) if ok else Reply(500, "the receiving function failed")

    def _user_matches(self, authorization: str) -> bool:
        scheme, _, encoded = authorization.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user = base64.b64decode(encoded, validate=True).decode().partition(":")[0]
        except (binascii.Error, UnicodeDecodeError):
            return False
        return hmac.compare_digest(user.encode(), str(self._uuid).encode())

    def _refuse_signature(self, headers: dict[str, str], body: bytes, now: float) -> Reply | None:
        stamp = headers.get("webhook-timestamp", "")
        if not (headers.get("webhook-id") and stamp and headers.get("webhook-signature")):
            return Reply(401, "webhook-id, webhook-timestamp and webhook-signature are required")
        if not stamp.isdigit() or abs(now - int(stamp)) > self._tolerance:
            return Reply(401, "webhook-timestamp is not within the tolerance")
        for webhook in self._webhooks:
            try:
                webhook.verify(body, headers, json_parse=False)
                return None
            except (WebhookVerificationError, ValueError):
                continue
        return Reply(401, "no signature matches")
