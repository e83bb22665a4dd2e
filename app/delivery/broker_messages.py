"""What a broker destination receives of a batch, and what publishing it came to
(Published). One message per event, in the batch's order, each the event as an HTTP
callback would receive it in the batch's array (`id` always on), its id the broker's
deduplication id (docs/destinations.md).

One message per event, not one per batch: a consumer of a broker reads events, and the
broker's deduplication works per message. The id is the event's own
(app/models/event_ids.py): the same on every attempt of the batch and on a replay, so a
batch sent again after a lost confirmation is not stored twice within the broker's
deduplication window.
"""

from __future__ import annotations

import json
import time
from typing import NamedTuple

from app import codec
from app.delivery.flight import Flight
from app.models import event_ids
from app.models.attempt_result import AttemptResult
from app.models.destination import Destination


class Message(NamedTuple):
    subject: str  # where the broker files it (NATS: the subject)
    id: str  # the deduplication id (NATS: Nats-Msg-Id)
    body: bytes  # JSON: the event as a callback receives it, with its `id`
    # the publish's trace context, carried on as message headers (docs/tracing.md)
    trace: tuple[tuple[str, str], ...] = ()


class Stop(NamedTuple):
    """Where a flight of gathered batches may end before its last message: at a message
    that begins a gathered batch (`at`, its index), once time.monotonic() passed
    `after`. A publish that stops there is a success for what the broker confirmed; the
    batches not begun go back to their lane untried (app/delivery/destinations.py)."""

    after: float
    at: frozenset[int]

    def now(self, index: int) -> bool:
        return index in self.at and time.monotonic() >= self.after


class Published(NamedTuple):
    """A batch's publish (or a test call's probe) as an attempt: its result, and a note
    for the attempt log's body (how many the broker confirmed; never a secret)."""

    result: AttemptResult
    note: str
    confirmed: int = 0  # messages of the batch the broker confirmed, from the first


def confirmed_note(done: int, total: int, word: str = "confirmed") -> str:
    """The attempt log's body for a publish that succeeded: all of it, or the part
    before where its flight stopped (Stop)."""
    if done == total:
        return f"{total} {word}"
    return f"{done} of {total} {word}; the rest in a flight of its own"


def messages(flight: Flight, destination: Destination) -> list[Message]:
    """The flight's messages, in order (its batch's, then those gathered into it: a
    subscription with transforms gathers none); what the routes' transforms made of its
    events when they shaped it (app/delivery/shaping.py)."""
    shaped = flight.shaped[0] if flight.shaped else None
    if shaped is None:
        entries = flight.every_entry  # with the batches gathered into the flight
        pairs = zip(entries, map(codec.unpack_entry, entries), strict=True)
    else:
        pairs = zip(shaped.entries, shaped.events, strict=True)
    found = []
    for entry, event in pairs:
        shape = event.delivery()
        shape["id"] = event_id = event_ids.of_entry(entry, event)
        body = json.dumps(shape, separators=(",", ":")).encode()
        trace: tuple[tuple[str, str], ...] = ()
        if event.traceparent is not None:
            trace = (("traceparent", event.traceparent),)
            if event.tracestate is not None:
                trace += (("tracestate", event.tracestate),)
        found.append(Message(destination.subject_for(event.topic, event.type, event.key),
                             event_id, body, trace))  # fmt: skip
    return found
