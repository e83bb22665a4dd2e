"""The body of POST /subscription, validated field by field before anything is stored."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from app.errors import InvalidInput
from app.models.callback_policy import REFUSED, Network, check_callback
from app.models.route import Route, Routes
from app.models.schema import Boolean, Doc, Integer, Rules, Shape, Text, Url

# How the refused link-local ranges are written as a URL's host, for the published
# schema (`not`): fe80::/10 is a first group of four hex digits fe8x-febx.
_WRITTEN = {
    ipaddress.ip_network("fe80::/10"): r"\[[fF][eE][89aAbB][0-9a-fA-F]:",
    ipaddress.ip_network("169.254.0.0/16"): r"169\.254\.",
}
DEFAULT_TIMEOUT = 500
DEFAULT_MAX = 100
MAX_UUID = 256


@dataclass(frozen=True)
class Callback(Url):
    userinfo: bool = False  # refused with its own message (check), absent from the schema
    description: str = (
        "where batches are POSTed; https (http with BUSBAR_ALLOW_HTTP), no query string, "
        "no user:password@, not in BUSBAR_CALLBACK_DENY's ranges unless "
        "BUSBAR_ALLOW_LINK_LOCAL_CALLBACKS"
    )

    def check(self, value: Any, where: str, rules: Rules) -> str:
        url = super().check(value, where, rules)
        if "@" in urlsplit(url).netloc:
            # Refused, not stored: it would be shown in listings and logs, and then not
            # even be used, since the callback's Basic credentials are the uuid's.
            raise InvalidInput(
                f"{where} must not hold a user or password (user:password@host): busbar "
                "calls it with HTTP Basic, the user being the subscription's uuid"
            )
        check_callback(url, where, allow_link_local=rules.allow_link_local, refused=rules.refused)
        return url

    def shape(self, rules: Rules) -> Doc:
        """The URL rule, less the link-local address literals the server refuses: a
        client (or a fuzzer) reading the schema is not told that those are valid. Other
        refused addresses (other spellings, the operator's ranges) are in the text."""
        doc = super().shape(rules)
        written = [] if rules.allow_link_local else [
            host for network, host in _WRITTEN.items() if network in rules.refused
        ]  # fmt: skip
        if written:
            doc["not"] = {"pattern": f"^https?://(?:{'|'.join(written)})"}
        return doc


SUBSCRIPTION = Shape(
    {
        "topics": Routes(),
        "callback": Callback(),
        "uuid": Text(
            r"[!-9;-~]", 1, MAX_UUID, "printable ASCII without spaces or colons",
            nullable=True, description="Basic-auth username busbar sends to the callback",
        ),
        "timeout": Integer(0, 3_600_000, nullable=True,
                           description=f"ms a batch may wait to fill; default {DEFAULT_TIMEOUT}"),
        "max": Integer(1, 10_000, nullable=True,
                       description=f"events per batch; default {DEFAULT_MAX}"),
        "max_attempts": Integer(1, 1000, nullable=True,
                                description="then dead letters; default: retry forever"),
        "event_ids": Boolean(nullable=True,
                             description="true: each delivered event carries a stable `id`"),
    },
    required=("topics", "callback"),
)  # fmt: skip


@dataclass(frozen=True)
class Subscription:
    routes: list[Route]
    callback: str
    uuid: str | None
    timeout: int
    max_events: int
    max_attempts: int  # 0: retry forever
    event_ids: bool = False  # deliver an `id` on each event (app/models/event_ids.py)

    @property
    def topics(self) -> list[str]:
        return sorted({r.topic for r in self.routes})


def parse_subscription(
    body: Any,
    *,
    allow_http: bool,
    allow_link_local: bool = False,
    refused: tuple[Network, ...] = REFUSED,
) -> Subscription:
    """Refuse a callback in the refused ranges unless allowed: the safe answer when a
    caller forgets."""
    if not isinstance(body, dict):
        raise InvalidInput("request body must be a JSON object")
    SUBSCRIPTION.known(body, "subscription")
    for required in SUBSCRIPTION.required:
        if required not in body:
            raise InvalidInput(f"{required} is required")
    rules = Rules(allow_http=allow_http, allow_link_local=allow_link_local, refused=refused)

    def given(name: str, default: Any) -> Any:
        value = body.get(name)
        return default if value is None else SUBSCRIPTION.fields[name].check(value, name, rules)

    fields = SUBSCRIPTION.fields
    return Subscription(
        routes=fields["topics"].check(body["topics"], "topics", rules),
        callback=fields["callback"].check(body["callback"], "callback", rules),
        uuid=given("uuid", None),
        timeout=given("timeout", DEFAULT_TIMEOUT),
        max_events=given("max", DEFAULT_MAX),
        max_attempts=given("max_attempts", 0),
        event_ids=given("event_ids", False),
    )
