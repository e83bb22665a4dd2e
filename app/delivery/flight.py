"""What a delivery step hands to the next: the batch in flight (with those gathered into a
broker's flight: lib/delivery.lua), or what the job did.

deliver_begin, deliver_take and a going-on deliver_ack all answer a begun delivery in
one shape (lib/delivery.lua's begin_delivery); this reads it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlsplit

from app.delivery.tags import Begin, Kind, Tag

if TYPE_CHECKING:  # for annotations only
    from app.delivery.shaping import Shaped
    from app.models.queue import Located


@dataclass(frozen=True)
class Outcome:
    """What one run of the job did, for logs and tests."""

    kind: Kind
    events: int = 0
    status: str = ""
    # the worker's next job, taken (and its delivery begun) by the step that ended this
    # one, as a slot's sweep finds it
    taken: Taken | None = None


class Gathered(NamedTuple):
    """A batch gathered into a broker flight after its first (lib/delivery.lua's
    gather): its messages follow the first batch's, and its ack or fail names it with
    the first (deliver_ack, deliver_fail)."""

    batch_id: bytes
    created_at: int
    attempts: int
    entries: list[bytes]


@dataclass(frozen=True)
class Flight:
    """A batch begun by a worker: what its send needs, and what its ack or fail must name."""

    # the partition's id (app/models/partitions.py): the subscriber's token at
    # `concurrency` 1, `<token>#<n>.<p>` above; owner() gives the subscriber's token
    pid: str
    worker: str
    job: bytes
    batch_id: bytes
    nonce: str
    began: float  # time.monotonic()
    callback: str
    uuid: str
    client: str  # the client's name, for logs: never its token
    entries: list[bytes]
    created_at: int = 0
    event_ids: bool = False  # the subscription asked for an `id` on each event
    salts: tuple[str, ...] = ()  # of the secrets that sign it (app/models/secrets.py)
    failing: bool = False  # its last attempt failed (app/delivery/share.py)
    replay: str = ""  # the lake replay that queued it (spark/replay.py), sent as a header
    # the subscriber's own headers as stored, secrets sealed (app/services/sealed_headers.py)
    headers: bytes = b""
    auth: bytes = b""  # how the callback authenticates the bus (app/models/callback_auth.py)
    client_cert: bytes = b""  # its TLS client certificate, the key sealed (client_cert.py)
    # what its attempt was answered: the first bytes of the body (app/delivery/answer.py's
    # KEPT), filled by the send step, for the attempt log
    answer: bytearray = field(default_factory=bytearray, compare=False)
    # time.monotonic() when the script that began it was sent, before its reply: the
    # script ran at some point after, and a process paused in between (its reply
    # waiting in a socket) must count the pause against its lease (request.Sender.send)
    issued: float | None = None
    # BUSBAR_REDIS_MIN_REPLICAS replicas were not seen to hold the begin in time: sent
    # from there, a failover could deliver its events again in another batch, so it is
    # held back instead (steps.AsyncDelivery.send)
    unconfirmed: bool = False
    lane: int = 0  # the priority lane it was queued on: which route its events took
    # its subscription's routes' transforms (app/models/route.py's transform_table; b""
    # for none) and their version, named by the attempt log (app/delivery/shaping.py)
    transforms: bytes = b""
    transform_version: int = 0
    # what they made of its events, filled by the send step (at most one), for the body
    # and for the ack to log and count
    shaped: list[Shaped] = field(default_factory=list, compare=False)
    # a broker its events are published to in place of the callback (JSON, secrets
    # sealed: app/models/destination.py), b"" for a callback (app/delivery/destinations.py)
    destination: bytes = b""
    # the batches gathered into the flight after this one (a broker's only), in order
    more: tuple[Gathered, ...] = ()
    # how many of its messages the broker confirmed, filled by a broker's send step (at
    # most one): its ack or fail acknowledges the batches those make whole (app/delivery/
    # plan.py; fewer than all after a failure, or a flight that stopped early)
    confirmed: list[int] = field(default_factory=list, compare=False)

    @property
    def every_entry(self) -> list[bytes]:
        """Its events in the order they go out: its own batch's, then each gathered one's."""
        if not self.more:
            return self.entries
        return [e for entries in (self.entries, *(g.entries for g in self.more)) for e in entries]

    def batches_confirmed(self) -> int:
        """How many of its batches (its own, then the gathered) the broker confirmed
        every message of, by what its send step filled in `confirmed`."""
        left = self.confirmed[0] if self.confirmed else 0
        whole = 0
        for entries in (self.entries, *(g.entries for g in self.more)):
            if left < len(entries):
                break
            left -= len(entries)
            whole += 1
        return whole

    @property
    def leased_from(self) -> float:
        return self.began if self.issued is None else self.issued

    @property
    def host(self) -> str:
        return urlsplit(self.callback).hostname or "?"


class Finished(NamedTuple):
    """What an ack or a fail step hands on: the `outcome` of the batch it settled, and
    `after`, the subscriber's next batch when an ack went on with it in the same step
    (a Flight), what the job did then (an Outcome), or None."""

    outcome: Outcome
    after: Flight | Outcome | None


@dataclass(frozen=True)
class Taken:
    """A job a sweep took: its queue, the job, and its delivery when the take began one
    (None for a job that is not a delivery); `left`, the jobs the sweep saw still
    waiting (how many more idle slots to wake)."""

    queue: Located
    job: bytes
    flight: Flight | Outcome | None
    left: int = 0


def begun(
    pid: str,
    worker: str,
    job: bytes,
    nonce: str,
    reply: Begin,
    issued: float,
    confirmed: bool = True,
) -> Flight | Outcome:
    """The batch a begin answered with, or the job's outcome when there was none to send
    (wait, idle, gone). `issued`: when the script that began it was sent; `confirmed`:
    whether the replicas BUSBAR_REDIS_MIN_REPLICAS asks for were seen to hold it."""
    if reply.tag is not Tag.DELIVER:
        return Outcome(Kind(reply.tag.value))
    b = reply.delivering
    return Flight(
        pid, worker, job, b.batch_id, nonce, time.monotonic(),
        b.callback.decode(), b.uuid.decode(), b.client.decode(), b.entries,
        int(b.created_at), b.event_ids == b"1", tuple(s.decode() for s in b.salts),
        b.failing == b"1", b.replay.decode(), b.headers, b.auth, b.client_cert, issued=issued,
        unconfirmed=not confirmed, lane=int(b.lane), transforms=b.transforms,
        transform_version=int(b.transform_version), destination=b.destination,
        more=tuple(Gathered(g[0], int(g[1]), int(g[2]), g[3]) for g in b.gathered),
    )  # fmt: skip
