"""The delivery scripts' KEYS and ARGV, each built in one place.

A script's slots are positional; a builder per script names them, so a caller cannot
put the nonce where the batch id goes. spec/app/delivery/test_calls.py checks every
builder against the KEYS/ARGV header of its script. Replies are read into
app/delivery/tags.py's types.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.delivery.flight import Flight
from app.delivery.tags import Begin, Found, Settled, read_ack, read_begin, read_fail, read_found
from app.lua.call import Call as Call
from app.models.attempt_result import CONFIRMED, OK, AttemptResult
from app.models.keys import MAIN, Keys
from app.models.queue import Located, take_keys


@dataclass(frozen=True)
class Sweep:
    """What a sweep names after a script's own keys: the keys of each queue (take_keys)
    and each queue's shard key base."""

    keys: list[str]
    bases: list[str]

    @classmethod
    def of(cls, group: list[Located], worker: str) -> Sweep:
        return cls(take_keys(group, worker), [q.place.base for q in group])


NO_SWEEP = Sweep([], [])


def _head(keys: Keys, pid: str, worker: str) -> list[str]:
    """KEYS[1..11] of deliver_begin, _ack and _fail (lib/delivery.lua lists them), for
    partition `pid` (its subscriber's hash, its shard's keys)."""
    home = keys.home(pid)
    return [
        keys.subscriber(pid),
        home.event_gauge,
        home.batch_gauge,
        home.counters,
        *home.job_states(MAIN),
        home.jobs_pending(MAIN, worker),
        keys.deadletters(pid),
        home.delivery_log,
        home.attempt_stream,
    ]


def begin(
    keys: Keys, pid: str, worker: str, job: bytes, now: int, nonce: str, salt: str
) -> Call[Begin]:
    base = keys.home(pid).base
    args: list[object] = [base, pid, now, job, nonce, salt]
    return Call("deliver_begin", _head(keys, pid, worker), args, read_begin)


def take(sweep: Sweep, worker: str, now: int, nonce: str, salt: str) -> Call[Found | None]:
    return Call("deliver_take", sweep.keys, [worker, now, nonce, salt, *sweep.bases], read_found)


@dataclass(frozen=True)
class Record:
    """What the attempt log keeps of an attempt besides what the script knows."""

    kept: int  # BUSBAR_ATTEMPT_LOG: attempts kept per subscriber, 0 = none
    oldest_ms: int  # now less BUSBAR_ATTEMPT_LOG_AGE_S
    body: bytes  # the first bytes of the answer's body
    stream_maxlen: int = 0  # BUSBAR_ATTEMPT_STREAM_MAXLEN: the shard's, for the lake; 0 = off


NO_RECORD = Record(0, 0, b"")


@dataclass(frozen=True)
class Ack:
    heal: int  # BUSBAR_HP_HEAL_RATE
    took_ms: int
    maxlen: int  # of the delivery log; 0 when it is off
    nonce: str = ""  # of a delivery begun in the same step ('' for none)
    salt: str = ""
    go_on: bool = False
    sweep: Sweep = NO_SWEEP
    result: AttemptResult = OK
    record: Record = NO_RECORD
    shaped: bytes = b""  # codec.pack_shaped: what the routes' transforms made, or b"" for none
    gathered: int = 0  # of a broker flight's gathered batches, how many were confirmed


def ack(keys: Keys, flight: Flight, now: int, a: Ack) -> Call[Settled]:
    base = keys.home(flight.pid).base
    return Call(
        "deliver_ack",
        _head(keys, flight.pid, flight.worker) + a.sweep.keys,
        [
            base, flight.pid, now, flight.job, flight.batch_id, flight.nonce, a.heal,
            a.took_ms, a.maxlen, a.nonce, a.salt, "1" if a.go_on else "", flight.worker,
            a.result.text, a.record.kept, a.record.oldest_ms, a.record.body,
            a.record.stream_maxlen, a.shaped, a.result.outcome, a.gathered, *a.sweep.bases,
        ],
        read_ack,
    )  # fmt: skip


@dataclass(frozen=True)
class Retry:
    """The failure policy's settings as deliver_fail reads them (docs/delivery.md)."""

    first_ms: int  # BUSBAR_RETRY_FIRST_MS
    max_ms: int  # BUSBAR_MAX_BACKOFF_MS
    circuit_failures: int  # BUSBAR_CIRCUIT_FAILURES
    probe_ms: int  # BUSBAR_CIRCUIT_PROBE_MS
    lone_ms: int = 0  # BUSBAR_RETRY_LONE_MS
    alive_ms: int = 0  # BUSBAR_RETRY_ALIVE_MS
    outage_ms: int = 0  # BUSBAR_CIRCUIT_OUTAGE_MS


@dataclass(frozen=True)
class Fail:
    damage: int  # BUSBAR_HP_DAMAGE_RATE
    jitter: float  # 1..1.5, drawn per failure
    result: AttemptResult  # a wait in it (a 429/503's, or held back) is no failure
    max_dead: int
    retry: Retry
    record: Record = NO_RECORD
    took_ms: int = 0
    shaped: bytes = b""  # as Ack's
    # of a broker flight of gathered batches: how many the broker confirmed before the
    # failing one (acknowledged in the same step), and what their ack needs
    confirmed: int = 0
    maxlen: int = 0  # of the delivery log; 0 when it is off
    heal: int = 0  # BUSBAR_HP_HEAL_RATE


def fail(keys: Keys, flight: Flight, now: int, f: Fail) -> Call[Settled]:
    base = keys.home(flight.pid).base
    r = f.retry
    return Call(
        "deliver_fail",
        _head(keys, flight.pid, flight.worker),
        [
            base, flight.pid, now, flight.job, flight.batch_id, flight.nonce, f.damage,
            f.jitter, f.result.text, f.max_dead, _blank(f.result.wait_ms),
            r.first_ms, r.max_ms, r.circuit_failures, r.probe_ms, f.record.kept,
            f.record.oldest_ms, f.record.body, flight.worker, f.took_ms,
            f.record.stream_maxlen, r.lone_ms, r.alive_ms, r.outage_ms,
            flight.transform_version or "", f.shaped, f.result.outcome, f.confirmed,
            f.maxlen, f.heal, CONFIRMED.text, CONFIRMED.outcome,
        ],
        read_fail,
    )  # fmt: skip


def _blank(n: int | None) -> int | str:
    """An optional number as a script's argument: '' for none."""
    return "" if n is None else n
