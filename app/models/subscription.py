"""The body of POST /subscription, validated field by field before anything is stored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from app.errors import InvalidInput
from app.models.callback_auth import Auth, AuthField
from app.models.callback_headers import Header, Headers
from app.models.callback_policy import PRODUCTION, Policy, check_callback
from app.models.client_cert import ClientCert, ClientCertField
from app.models.filters import DEFAULT_BOUNDS, Bounds
from app.models.partitions import MAX_CONCURRENCY
from app.models.route import Route, Routes
from app.models.schema import Boolean, Doc, Integer, Rules, Shape, Text, Url

# How refused hosts are written in a URL, for the published schema's `not`: the
# link-local ranges (fe80::/10 is a first group fe8x-febx), only while they are denied;
# the internal IPv4 ranges as dotted quads; every other numeric spelling of an IPv4
# address (127.1, 2130706433, 0x7f000001), public ones too (the schema errs on the side
# of calling them invalid); localhost names; and the IPv6 forms that are internal or may
# embed an internal IPv4 address. The server judges the address itself (callback_policy).
_LINK_LOCAL = (r"169\.254\.[0-9]+\.[0-9]+", r"\[[fF][eE][89aAbB][0-9a-fA-F]:[^\]]*\]")
_INTERNAL = (
    r"(?:0|10|127)\.[0-9]+\.[0-9]+\.[0-9]+",
    r"172\.(?:1[6-9]|2[0-9]|3[01])\.[0-9]+\.[0-9]+",
    r"192\.(?:168|0\.0)\.[0-9]+(?:\.[0-9]+)?",
    r"100\.(?:6[4-9]|[7-9][0-9]|1[01][0-9]|12[0-7])\.[0-9]+\.[0-9]+",
    r"198\.1[89]\.[0-9]+\.[0-9]+",
    r"(?:22[4-9]|2[3-5][0-9])\.[0-9]+\.[0-9]+\.[0-9]+",
    r"(?![0-9]{1,3}(?:\.[0-9]{1,3}){3}(?:[:/#]|$))[0-9][0-9a-fA-FxX.]*",
    r"(?:[lL][oO][cC][aA][lL][hH][oO][sS][tT]|[^/:#]*\.[lL][oO][cC][aA][lL][hH][oO][sS][tT])\.?",
    r"\[(?:[0:]|[fF](?:[cCdD][0-9a-fA-F]{2}|[eE][c-fC-F][0-9a-fA-F]|[fF][0-9a-fA-F]{2}):"
    r"|64:|2002:|2001:0*:)[^\]]*\]",
)
DEFAULT_TIMEOUT = 500
DEFAULT_MAX = 100
MAX_UUID = 256


@dataclass(frozen=True)
class Callback(Url):
    userinfo: bool = False  # refused with its own message (check), absent from the schema
    description: str = (
        "where batches are POSTed; https (http with BUSBAR_ALLOW_HTTP), no query string, "
        "no user:password@; not the bus's own host or an internal network (loopback, "
        "private, shared, unique-local: BUSBAR_CALLBACK_ALLOW opens them), nor link-local "
        "or cloud metadata (BUSBAR_CALLBACK_DENY), in any spelling"
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
        check_callback(url, where, rules.callbacks)
        return url

    def shape(self, rules: Rules) -> Doc:
        """The URL rule, less the hosts the server refuses as written: a client (or a
        fuzzer) reading the schema is not told that those are valid."""
        doc = super().shape(rules)
        denied = rules.callbacks.deny
        link_local = list(_LINK_LOCAL) if denied else []
        doc["not"] = {"pattern": f"^https?://(?:{'|'.join([*link_local, *_INTERNAL])})(?:[:/#]|$)"}
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
        "concurrency": Integer(1, MAX_CONCURRENCY, nullable=True,
                               description="deliveries in flight at once, each ordering key "
                               "keeping its order (docs/semantics.md); default 1: one, "
                               "in publish order"),
        "headers": Headers(),
        "auth": AuthField(),
        "client_cert": ClientCertField(),
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
    concurrency: int = 1  # partitions, each with a delivery in flight (app/models/partitions.py)
    headers: tuple[Header, ...] | None = None  # None: not given (a changed one keeps its own)
    auth: Auth | None = None  # None: not given (a changed one keeps its own)
    client_cert: ClientCert | str | None = None  # None: not given; client_cert.REMOVE: {}

    @property
    def topics(self) -> list[str]:
        return sorted({r.topic for r in self.routes})


def parse_subscription(
    body: Any,
    *,
    allow_http: bool,
    policy: Policy = PRODUCTION,
    filters: Bounds = DEFAULT_BOUNDS,
) -> Subscription:
    """The callback policy defaults to production's (nothing internal opened): the safe
    answer when a caller forgets."""
    if not isinstance(body, dict):
        raise InvalidInput("request body must be a JSON object")
    SUBSCRIPTION.known(body, "subscription")
    for required in SUBSCRIPTION.required:
        if required not in body:
            raise InvalidInput(f"{required} is required")
    rules = Rules(allow_http=allow_http, callbacks=policy, filters=filters)

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
        concurrency=given("concurrency", 1),
        headers=given("headers", None),
        auth=given("auth", None),
        client_cert=given("client_cert", None),
    )
