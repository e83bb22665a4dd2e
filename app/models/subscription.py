"""The body of POST /subscription, validated field by field before anything is stored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.errors import InvalidInput
from app.models.callback_auth import Auth, AuthField
from app.models.callback_headers import Header, Headers
from app.models.callback_policy import PRODUCTION, Policy
from app.models.callback_url import Callback
from app.models.client_cert import ClientCert, ClientCertField
from app.models.destination import Destination, DestinationField
from app.models.fields import Boolean, Integer, Rules, Shape, Text
from app.models.filters import DEFAULT_BOUNDS, Bounds
from app.models.partitions import MAX_CONCURRENCY
from app.models.route import Route, Routes

DEFAULT_TIMEOUT = 500
DEFAULT_MAX = 100
MAX_UUID = 256


# Which fields take a null (docs/api.md, Nulls): Routemaster's own (uuid, timeout, max)
# as Routemaster does, and max_attempts, which GET /subscriptions lists as null for
# "forever"; there null means what leaving the field out means. busbar's other fields
# refuse it, naming the field.
SUBSCRIPTION = Shape(
    {
        "topics": Routes(),
        "callback": Callback(),
        "uuid": Text(
            r"[!-9;-~]", 1, MAX_UUID, "printable ASCII without spaces or colons",
            nullable=True, description="Basic-auth username busbar sends to the callback; "
            "null or absent: the one it has, else one made up",
        ),
        "timeout": Integer(0, 3_600_000, nullable=True,
                           description="ms a batch may wait to fill; null or absent: "
                           f"{DEFAULT_TIMEOUT}"),
        "max": Integer(1, 10_000, nullable=True,
                       description=f"events per batch; null or absent: {DEFAULT_MAX}"),
        "max_attempts": Integer(1, 1000, nullable=True,
                                description="then dead letters; null or absent: retry forever"),
        "event_ids": Boolean(description="true: each delivered event carries a stable `id`; "
                             "absent: false"),
        "concurrency": Integer(1, MAX_CONCURRENCY,
                               description="deliveries in flight at once, each ordering key "
                               "keeping its order (docs/semantics.md); absent: 1: one, "
                               "in publish order"),
        "headers": Headers(),
        "auth": AuthField(),
        "client_cert": ClientCertField(),
        "destination": DestinationField(),
    },
    # and one of `callback` and `destination` (parse_subscription)
    required=("topics",),
    left_out={
        "headers": "to keep the subscription's own, or give {} to remove them",
        "auth": "to keep the subscription's own, or give {\"type\": \"basic\"} for the uuid",
        "client_cert": "to keep the subscription's own, or give {} to remove it",
    },
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
    # a broker in place of the callback (docs/destinations.md); `callback` is then its URL
    destination: Destination | None = None

    @property
    def topics(self) -> list[str]:
        return sorted({r.topic for r in self.routes})


def parse_subscription(
    body: Any,
    *,
    allow_http: bool,
    policy: Policy = PRODUCTION,
    filters: Bounds = DEFAULT_BOUNDS,
    transforms: tuple[int, int] = Rules.transforms,
) -> Subscription:
    """The callback policy defaults to production's (nothing internal opened): the safe
    answer when a caller forgets."""
    if not isinstance(body, dict):
        raise InvalidInput("request body must be a JSON object")
    SUBSCRIPTION.known(body, "subscription")
    for required in SUBSCRIPTION.required:
        if required not in body:
            raise InvalidInput(f"{required} is required")
    _one_way_out(body)
    rules = Rules(allow_http=allow_http, callbacks=policy, filters=filters, transforms=transforms)

    def given(name: str, default: Any) -> Any:
        value = SUBSCRIPTION.given(body, name, name, rules)
        return default if value is None else value

    fields = SUBSCRIPTION.fields
    destination = given("destination", None)
    return Subscription(
        routes=fields["topics"].check(body["topics"], "topics", rules),
        callback=(
            destination.url
            if destination is not None
            else fields["callback"].check(body["callback"], "callback", rules)
        ),
        uuid=given("uuid", None),
        timeout=given("timeout", DEFAULT_TIMEOUT),
        max_events=given("max", DEFAULT_MAX),
        max_attempts=given("max_attempts", 0),
        event_ids=given("event_ids", False),
        concurrency=given("concurrency", 1),
        headers=given("headers", None),
        auth=given("auth", None),
        client_cert=given("client_cert", None),
        destination=destination,
    )


# what only an HTTP callback takes: a destination carries its own credentials
CALLBACK_ONLY = ("headers", "auth", "client_cert")


def _one_way_out(body: dict[str, Any]) -> None:
    """A callback or a destination, one of them: a subscription has one way out."""
    if "destination" not in body:
        if "callback" not in body:
            raise InvalidInput("callback is required (or a `destination`: docs/destinations.md)")
        return
    if "callback" in body:
        raise InvalidInput("give either `callback` or `destination`, not both")
    for name in CALLBACK_ONLY:
        if name in body:
            raise InvalidInput(
                f"{name} is for an HTTP callback; a destination takes its credentials in "
                "itself (`user` and `password`, or `token`)"
            )
