"""The body of POST /subscription, validated field by field before anything is stored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.errors import InvalidInput
from app.models import validate
from app.models.callback_policy import check_callback
from app.models.route import Route, effective_routes, parse_route

SUBSCRIPTION_KEYS = {"topics", "callback", "uuid", "timeout", "max", "max_attempts"}
DEFAULT_TIMEOUT = 500
DEFAULT_MAX = 100
MAX_UUID = 256


@dataclass(frozen=True)
class Subscription:
    routes: list[Route]
    callback: str
    uuid: str | None
    timeout: int
    max_events: int
    max_attempts: int  # 0: retry forever

    @property
    def topics(self) -> list[str]:
        return sorted({r.topic for r in self.routes})


def _uuid(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_UUID:
        raise InvalidInput(f"uuid must be a string of 1 to {MAX_UUID} characters")
    if ":" in value or any(ord(c) < 33 or ord(c) > 126 for c in value):
        raise InvalidInput("uuid must be printable ASCII without spaces or colons")
    return value


def parse_subscription(
    body: Any, *, allow_http: bool, allow_link_local: bool = False
) -> Subscription:
    """Refuse a link-local callback unless allowed: the safe answer when a caller forgets."""
    if not isinstance(body, dict):
        raise InvalidInput("request body must be a JSON object")
    validate.known_keys(body, SUBSCRIPTION_KEYS, "subscription")
    for required in ("topics", "callback"):
        if required not in body:
            raise InvalidInput(f"{required} is required")
    topics = body["topics"]
    if not isinstance(topics, list):
        raise InvalidInput("topics must be a list of topic names or route objects")
    routes = [parse_route(entry, f"topics[{i}]") for i, entry in enumerate(topics)]
    timeout = body.get("timeout")
    max_events = body.get("max")
    attempts = body.get("max_attempts")
    callback = validate.url(body["callback"], "callback", allow_http)
    check_callback(callback, "callback", allow_link_local=allow_link_local)
    return Subscription(
        routes=effective_routes(routes),
        callback=callback,
        uuid=_uuid(body.get("uuid")),
        timeout=DEFAULT_TIMEOUT
        if timeout is None
        else validate.integer(timeout, "timeout", 0, 3_600_000),
        max_events=DEFAULT_MAX
        if max_events is None
        else validate.integer(max_events, "max", 1, 10_000),
        max_attempts=0 if attempts is None else validate.integer(attempts, "max_attempts", 1, 1000),
    )
