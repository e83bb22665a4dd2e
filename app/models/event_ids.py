"""Event ids: what a subscription with `"event_ids": true` receives as each event's `id`.

An id names one published event, whatever happens to it after: it is derived, never
drawn at delivery, so every retry, every replay of a dead letter and every Redis copy
gives the same one.
- A publish with an `Idempotency-Key` header (its publish id): from (topic, publish id,
  position of the event in the publish), stored with the event (26 characters: Redis's
  Lua msgpack cannot read msgpack's bin type, and Lua reads queued events). The same
  publish repeated with the same publish id after a lost answer gives its events the
  same ids, even after the window in which busbar drops the repeat itself
  (BUSBAR_PUBLISH_DEDUPE_S), so a receiver can still drop copies by id.
- A publish without one: from the event's bytes as queued (topic, type, url, t, data;
  never its trace context, which differs per request). Nothing is stored; two
  publishes of an identical event (same t included) share an id, which is what they
  are to a receiver.
- A lake replay (spark/replay.py) queues each event with the id it was delivered with
  (or the lake's `lake_` id of a row from before ids), stored whole.
- Coalescing replaces a queued event with a newer one: the newer event keeps its own id,
  and the replaced one's id is never delivered.
"""

from __future__ import annotations

import hashlib

from app import codec
from app.codec import QueuedEvent

ID_BYTES = 16


# base32's alphabet, lower case, taken two characters (10 bits) at a time
_PAIRS = [
    a + b for a in "abcdefghijklmnopqrstuvwxyz234567" for b in "abcdefghijklmnopqrstuvwxyz234567"
]
_SHIFTS = tuple(range(120, -1, -10))


def _text(digest: bytes) -> str:
    """The first ID_BYTES of `digest` in unpadded lower-case base32 (26 characters), as
    base64.b32encode writes them, in half its time: the lake computes one per row."""
    n = int.from_bytes(digest[:ID_BYTES], "big") << 2  # 128 bits padded to 26 x 5
    return "".join([_PAIRS[(n >> shift) & 1023] for shift in _SHIFTS])


def for_publish(topic: str, publish: str, index: int) -> str:
    """The stored id of the index-th event of a publish."""
    return _text(hashlib.sha256(f"busbar event\n{topic}\n{publish}\n{index}".encode()).digest())


def of_entry(entry: bytes, event: QueuedEvent) -> str:
    """The id a subscriber receives for a queued entry (`<expires_at>|<event>`)."""
    text = event.stored_id
    if text is None:
        packed = entry.partition(b"|")[2]
        if event.traceparent is not None:  # the id is the event's, whatever its trace
            packed = codec.untraced(packed)
        text = _text(hashlib.sha256(b"busbar event content\n" + packed).digest())
    elif "_" in text:  # a whole id, kept by a lake replay (base32 has no `_`)
        return text
    return "evt_" + text
