"""The delivery scripts' replies as types: a tag for the first value of each, the kind of
an outcome, and the reply shapes (a begin, a sweep's find, a settle).

deliver_begin, deliver_take, deliver_ack and deliver_fail answer with a leading tag
(lib/delivery.lua); the builders in app/delivery/calls.py read every reply through here,
so no caller compares bytes, and `lost` (the job is no longer held by this worker)
becomes JobLost at the one place a reply comes in. What a begun delivery needs of its
caller (the nonce, when its script was sent) is joined in app/delivery/replies.py.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

from app.errors import JobLost


class Tag(enum.StrEnum):
    DELIVER = "deliver"  # a batch begun: send it
    WAIT = "wait"  # nothing due before {due}
    IDLE = "idle"  # nothing queued
    GONE = "gone"  # no such subscriber (deleted)
    LOST = "lost"  # this worker no longer holds the job
    STALE = "stale"  # the answer came after its delivery was superseded
    RUN = "run"  # a sweep took a job that is not a delivery
    NEXT = "next"  # an ack that went on: the next batch begun in the same step
    DONE = "done"  # an ack or fail that settled


class Circuit(enum.StrEnum):
    """The subscriber's circuit as deliver_fail left it (its reply's third value)."""

    CLOSED = ""  # backing off
    OPEN = "open"  # open before this fail: the next probe
    OPENED = "opened"  # this fail opened it


class Kind(enum.StrEnum):
    """What one run of a job did (Outcome.kind)."""

    DELIVERED = "delivered"
    FAILED = "failed"
    DEFERRED = "deferred"  # the subscriber asked to wait (429/503 with Retry-After)
    WAIT = "wait"
    IDLE = "idle"
    GONE = "gone"
    STALE = "stale"


class Delivering(NamedTuple):
    """A begun delivery as lib/delivery.lua's begin_delivery answers it, by name: the
    fields after the tag `deliver`, in its order (spec/app/delivery/test_tags.py checks
    the count against a real begin)."""

    lane: bytes | int
    batch_id: bytes
    created_at: int
    attempts: int
    callback: bytes
    uuid: bytes
    client: bytes  # the client's name: never its token
    entries: list[bytes]
    event_ids: bytes  # b"1" when the subscription asked for an `id` on each event
    salts: list[bytes]  # of each secret that signs now
    failing: bytes  # b"1" when its last attempt failed
    replay: bytes  # the lake replay that queued it, or b""
    headers: bytes
    auth: bytes
    client_cert: bytes
    transforms: bytes
    transform_version: bytes
    destination: bytes  # a broker in place of the callback, or b"" (destination.py)
    # the batches gathered into a broker flight after this one (lib/delivery.lua's
    # gather): [id, created_at, attempts, [entry...]] each; none for a callback
    gathered: list[Any]


class Begin(NamedTuple):
    """deliver_begin's reply: the tag, and the delivery begun (DELIVER) or what follows
    the tag otherwise (WAIT: when it is due)."""

    tag: Tag
    fields: list[Any]

    @property
    def delivering(self) -> Delivering:
        return Delivering(*self.fields)


class Found(NamedTuple):
    """deliver_take's find: the place's index in the sweep, the job, its delivery begun
    (None for a job that is not a delivery) and the jobs still waiting."""

    at: int
    job: bytes
    begin: Begin | None
    left: int


class Settled(NamedTuple):
    """deliver_ack's or deliver_fail's reply: DONE (with what a going-on sweep found,
    if anything), NEXT with the next batch begun, or what the fence said (STALE, GONE)."""

    tag: Tag
    begin: Begin | None = None
    found: Found | None = None
    opened: bool = False  # a fail that opened the subscriber's circuit


def _tag(value: bytes, script: str) -> Tag:
    tag = Tag(value.decode())
    if tag is Tag.LOST:
        raise JobLost(f"{script}: the delivery job is no longer held by this worker")
    return tag


def read_begin(reply: list[Any], script: str = "deliver_begin") -> Begin:
    return Begin(_tag(reply[0], script), reply[1:])


def read_found(reply: list[Any] | None, script: str = "deliver_take") -> Found | None:
    if not reply:
        return None
    at, job, begin, left = reply
    tag = _tag(begin[0], script)
    return Found(int(at) - 1, job, None if tag is Tag.RUN else Begin(tag, begin[1:]), int(left))


def read_ack(reply: list[Any]) -> Settled:
    tag = _tag(reply[0], "deliver_ack")
    if tag is Tag.NEXT:
        return Settled(tag, begin=read_begin(reply[1], "deliver_ack"))
    if tag is Tag.DONE and len(reply) > 2:
        return Settled(tag, found=read_found(reply[2:], "deliver_ack"))
    return Settled(tag)


def read_fail(reply: list[Any]) -> Settled:
    tag = _tag(reply[0], "deliver_fail")
    circuit = Circuit(reply[2].decode()) if tag is Tag.DONE and len(reply) > 2 else None
    return Settled(tag, opened=circuit is Circuit.OPENED)
