"""Published events: validation exactly as the API promises, then one msgpack encoding.

Validation happens entirely before anything is written, so a bulk publish with one bad
event changes nothing (all-or-nothing), and every message names the event and field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app import codec
from app.errors import InvalidInput
from app.models.fields import (
    INT64_MIN,
    UINT64_MAX,
    Choice,
    Integer,
    JsonObject,
    Rules,
    Shape,
    Url,
    Utf8,
)
from app.models.filters import view_of
from app.models.trace_context import TraceContext

# Routemaster's optional fields take a null (its Ruby client sends "timestamp": null),
# meaning what leaving them out means; busbar's own `key` refuses it (docs/api.md, Nulls).
EVENT = Shape(
    {
        "type": Choice(codec.EVENT_TYPES),
        "url": Url(description="the resource the event is about; https, no query string"),
        "timestamp": Integer(
            0, 2**53, nullable=True, description="ms since the epoch; null or absent: now"
        ),
        "data": JsonObject(
            nullable=True,
            description="at most BUSBAR_MAX_EVENT_DATA bytes once msgpacked (256 KiB unless "
            "the bus sets another limit)",
        ),
        "key": Utf8(
            1,
            256,
            description="the ordering key: 1-256 bytes of UTF-8 without control characters "
            "(shown here in its ASCII form); events with one key are delivered in publish "
            "order, one at a time; absent: the url (docs/semantics.md)",
        ),
    },
    required=("type", "url"),
    left_out={"key": "to order by the url"},
)


@dataclass(frozen=True)
class Event:
    type: str
    url: str
    t: int
    data: dict[str, Any] | None
    packed_data: bytes | None = field(default=None, compare=False, repr=False)
    event_id: str | None = None  # from a publish id (app/models/event_ids.py)
    key: str | None = None  # the ordering key the publisher gave; None: the url

    def view(self) -> dict[str, Any]:
        """What a content filter sees of it: the one definition, app/models/filters.py's."""
        return view_of({"type": self.type, "url": self.url, "key": self.key, "data": self.data})

    @property
    def ordering_key(self) -> str:
        """What the queueing step partitions by ('' stands for the url: fewer bytes)."""
        return self.key if self.key is not None else ""

    def pack(
        self, topic: str, trace: TraceContext | None = None, schema: int | None = None
    ) -> bytes:
        """Its queued bytes; `trace`: the publish's context, the same for all its events;
        `schema`: the version of its type's schema its data was checked against."""
        return codec.pack_event(
            topic,
            self.type,
            self.url,
            self.t,
            self.data,
            self.packed_data,
            self.event_id,
            trace,
            self.key,
            schema,
        )


def parse_event(
    raw: Any, *, now_ms: int, allow_http: bool, max_data: int, where: str = ""
) -> Event:
    prefix = f"{where}: " if where else ""
    try:
        return _parse(raw, now_ms, allow_http, max_data)
    except InvalidInput as exc:
        raise InvalidInput(prefix + exc.message) from None


_RULES = {allow: Rules(allow_http=allow) for allow in (False, True)}  # one each, not one an event


def _parse(raw: Any, now_ms: int, allow_http: bool, max_data: int) -> Event:
    if not isinstance(raw, dict):
        raise InvalidInput("an event must be a JSON object")
    EVENT.known(raw, "event")
    rules, fields = _RULES[allow_http], EVENT.fields
    type_ = fields["type"].check(raw.get("type"), "type", rules)
    if "url" not in raw:
        raise InvalidInput("url is required")
    url = fields["url"].check(raw["url"], "url", rules)
    timestamp = EVENT.given(raw, "timestamp", "timestamp", rules)
    t = now_ms if timestamp is None else timestamp
    key = EVENT.given(raw, "key", "key", rules)
    data = EVENT.given(raw, "data", "data", rules)
    packed = None
    if data is not None:
        try:
            packed = codec.pack_data(data)
        except (OverflowError, ValueError, TypeError):
            where = _beyond_64_bits(data, "data")
            what = f"{where} is an integer beyond 64 bits" if where else "data"
            raise InvalidInput(f"{what}: msgpack cannot hold it") from None
        if len(packed) > max_data:
            raise InvalidInput(
                f"data is {len(packed)} bytes of msgpack, over the {max_data} allowed "
                "(BUSBAR_MAX_EVENT_DATA)"
            )
    return Event(type=type_, url=url, t=t, data=data, packed_data=packed, key=key)


def _beyond_64_bits(value: Any, path: str) -> str | None:
    """The path of the first integer in `value` that msgpack cannot hold: the only value
    JSON can express that msgpack refuses, so the message can name exactly where it is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return None if INT64_MIN <= value <= UINT64_MAX else path
    if isinstance(value, dict):
        items = [(f"{path}.{k}", v) for k, v in value.items()]
    elif isinstance(value, list):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    else:
        return None
    return next((found for p, v in items if (found := _beyond_64_bits(v, p))), None)


def parse_events(
    body: Any, *, now_ms: int, allow_http: bool, max_data: int, max_events: int = 1000
) -> list[Event]:
    """One event object, or a JSON array of at most `max_events` (BUSBAR_MAX_PUBLISH_EVENTS:
    a publish is all or nothing, and its topic step is one script, which every other
    client of Redis waits for; bench.scripts measures it at the cap)."""
    if isinstance(body, list):
        if len(body) > max_events:
            raise InvalidInput(
                f"a publish holds at most {max_events:,} events (BUSBAR_MAX_PUBLISH_EVENTS); "
                f"this one holds {len(body):,}: split it into several requests"
            )
        return [
            parse_event(
                e, now_ms=now_ms, allow_http=allow_http, max_data=max_data, where=f"event {i}"
            )
            for i, e in enumerate(body)
        ]
    return [parse_event(body, now_ms=now_ms, allow_http=allow_http, max_data=max_data)]
