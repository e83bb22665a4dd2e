"""Typed shapes of what the bus takes and answers. Answers are read leniently (unknown
keys ignored), so a newer bus with more fields does not break an older client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

EVENT_TYPES = ("create", "update", "delete", "noop")


@dataclass(frozen=True)
class NewEvent:
    """An event to publish: `timestamp` (ms) defaults to its reception by the bus; `key`,
    the ordering key (1-256 bytes), to its url."""

    type: str
    url: str
    data: dict[str, Any] | None = None
    timestamp: int | None = None
    key: str | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"type": self.type, "url": self.url}
        if self.data is not None:
            body["data"] = self.data
        if self.timestamp is not None:
            body["timestamp"] = self.timestamp
        if self.key is not None:
            body["key"] = self.key
        return body


@dataclass(frozen=True)
class Route:
    """A subscription's route: priority 0 (highest) to 9, ttl in seconds, event types,
    coalescing by url, a content filter (docs/filters.md) and a transform (a JSONata
    expression whose output replaces each event's data: docs/transforms.md). A plain
    topic name is a route with none of these."""

    topic: str
    priority: int | None = None
    ttl: int | None = None
    types: tuple[str, ...] | None = None
    coalesce: bool = False
    filter: dict[str, Any] | None = None
    transform: str | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"topic": self.topic}
        if self.priority is not None:
            body["priority"] = self.priority
        if self.ttl is not None:
            body["ttl"] = self.ttl
        if self.types is not None:
            body["types"] = list(self.types)
        if self.coalesce:
            body["coalesce"] = True
        if self.filter is not None:
            body["filter"] = self.filter
        if self.transform is not None:
            body["transform"] = self.transform
        return body


@dataclass(frozen=True)
class Event:
    """A delivered event; `id` only on subscriptions with `event_ids`, and then its
    publisher's W3C trace context (`traceparent`, `tracestate`) when it sent one; `key`
    when its publisher gave an ordering key."""

    topic: str
    type: str
    url: str
    t: int
    data: dict[str, Any] | None = None
    id: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None
    key: str | None = None

    @classmethod
    def from_json(cls, raw: Any) -> Event:
        if not isinstance(raw, dict):
            raise ValueError("an event must be a JSON object")
        topic, type_, url, t = (raw.get(k) for k in ("topic", "type", "url", "t"))
        if not all(isinstance(v, str) for v in (topic, type_, url)):
            raise ValueError("an event needs topic, type and url strings")
        if not isinstance(t, int) or isinstance(t, bool):
            raise ValueError("an event needs an integer t")
        data, id_ = raw.get("data"), raw.get("id")
        if data is not None and not isinstance(data, dict):
            raise ValueError("an event's data must be an object")
        if id_ is not None and not isinstance(id_, str):
            raise ValueError("an event's id must be a string")
        trace = [raw.get("traceparent"), raw.get("tracestate")]
        if any(v is not None and not isinstance(v, str) for v in trace):
            raise ValueError("an event's traceparent and tracestate must be strings")
        key = raw.get("key")
        if key is not None and not isinstance(key, str):
            raise ValueError("an event's key must be a string")
        return cls(topic, type_, url, t, data, id_, *trace, key)


@dataclass(frozen=True)
class Batch:
    """One delivery: its events in order, the Standard Webhooks message id (the same on
    every retry of unchanged content), the attempt's timestamp (s), and its
    `traceparent` header: the trace context to continue (a child of it is the handler's)."""

    events: tuple[Event, ...]
    webhook_id: str | None = None
    timestamp: int | None = None
    traceparent: str | None = None

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)


@dataclass(frozen=True)
class Token:
    name: str
    token: str
    operator: bool = False  # may subscribe to busbar_operations

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Token:
        """Fields a newer bus adds are ignored, so this client keeps working with it."""
        return cls(raw["name"], raw["token"], bool(raw.get("operator", False)))


@dataclass(frozen=True)
class Topic:
    name: str
    publisher: str | None  # the publisher's token for root and the publisher, else its name
    events: int
    publisher_name: str | None = None

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Topic:
        return cls(raw["name"], raw.get("publisher"), raw["events"], raw.get("publisher_name"))


@dataclass(frozen=True)
class Circuit:
    """The bus's failure policy for one subscriber: `open` after a run of failed attempts
    (then probed once an interval, at `next_probe_at`), closed by the first success."""

    state: str = "closed"  # open | closed
    opened_at: int | None = None  # ms
    next_probe_at: int | None = None  # ms
    failures_in_a_row: int = 0

    @classmethod
    def from_json(cls, raw: dict[str, Any] | None) -> Circuit:
        raw = raw or {}
        return cls(
            raw.get("state", "closed"), raw.get("opened_at"), raw.get("next_probe_at"),
            raw.get("failures_in_a_row", 0),
        )  # fmt: skip


@dataclass(frozen=True)
class Subscription:
    subscriber: str | None  # the token, as Routemaster lists it (only its owner and root see it)
    name: str | None
    callback: str
    uuid: str | None
    max_events: int
    timeout: int
    topics: list[str]
    sent: int
    queued: int
    oldest: int | None
    max_attempts: int | None = None
    health_points: int = 100
    event_ids: bool = False
    deadletters: int = 0
    failures: int = 0
    next_attempt_at: int | None = None
    routes: list[dict[str, Any]] = field(default_factory=list)
    circuit: Circuit = field(default_factory=Circuit)  # a bus older than the policy: closed
    concurrency: int = 1  # deliveries in flight at once, each ordering key in order
    draining: int | None = None  # the old concurrency while a change of it drains
    in_flight: int = 0

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Subscription:
        events = raw.get("events") or {}
        return cls(
            subscriber=raw.get("subscriber"),
            name=raw.get("name"),
            callback=raw["callback"],
            uuid=raw.get("uuid"),
            max_events=raw["max_events"],
            timeout=raw["timeout"],
            topics=list(raw.get("topics", [])),
            sent=events.get("sent", 0),
            queued=events.get("queued", 0),
            oldest=events.get("oldest"),
            max_attempts=raw.get("max_attempts"),
            health_points=raw.get("health_points", 100),
            event_ids=bool(raw.get("event_ids", False)),
            deadletters=raw.get("deadletters", 0),
            failures=raw.get("failures", 0),
            next_attempt_at=raw.get("next_attempt_at"),
            routes=list(raw.get("routes", [])),
            circuit=Circuit.from_json(raw.get("circuit")),
            concurrency=raw.get("concurrency", 1),
            draining=raw.get("draining"),
            in_flight=raw.get("in_flight", 0),
        )


@dataclass(frozen=True)
class DeadLetter:
    event: Event
    attempts: int
    failed_at: int
    last_status: str

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> DeadLetter:
        return cls(Event.from_json(raw), raw["attempts"], raw["failed_at"], raw["last_status"])


@dataclass(frozen=True)
class Secret:
    """A signing secret (`whsec_...`); `previous_until` (ms): until then the secret it
    replaced still signs deliveries too."""

    secret: str
    previous_until: int | None = None

    def __repr__(self) -> str:  # never print a secret by accident
        return f"Secret(secret='whsec_…', previous_until={self.previous_until})"


@dataclass(frozen=True)
class TransformTried:
    """What a transform made of one event (POST /transforms/test): its `output` (the
    event's new `data`), or `dropped` when it gives nothing (the event would not be sent),
    or `failed` when the evaluation failed: `{"reason": "transform_failed", "bound":
    "time"|"depth"|"size"|"error", "message": ...}`; and how long it took."""

    output: Any
    dropped: bool
    failed: dict[str, str] | None
    took_ms: float

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> TransformTried:
        return cls(raw.get("output"), bool(raw.get("dropped", False)), raw.get("failed"),
                   float(raw["took_ms"]))  # fmt: skip
