"""What a delivery's steps decide before and after asking Redis, apart from their I/O
(app/delivery/steps.py does that): the nonce and salt draws, the body, what an
acknowledgement or a failure asks besides the flight, and which queues an ack sweeps.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from app import codec
from app.clock import Clock, now_ms
from app.delivery import calls
from app.delivery.flight import Finished, Flight
from app.delivery.replies import settled
from app.delivery.tags import Kind, Settled
from app.models import attempts, event_ids
from app.models.attempt_result import AttemptResult
from app.models.keys import Keys
from app.models.queue import Located, script_groups
from app.models.secrets import SALT_BYTES
from app.models.trace_context import TraceContext
from config.settings import Settings

log = logging.getLogger(__name__)
MAX_DEAD_LETTERS = 10_000
NONCE_BYTES = 8
MAX_RUN = 16  # batches of one subscriber delivered back to back before its job requeues


class Draws:
    """A delivery's fencing nonce (64 bits) and a fresh signing salt (new_salt's size),
    cut from random bytes drawn from the OS a page at a time: each os.urandom is a
    system call, and the engine makes one draw per delivery (about 5% of a busy
    worker's CPU when drawn one by one). One per Plan (each engine's AsyncDelivery)."""

    PAGE = 4096

    def __init__(self) -> None:
        self._page, self._at = b"", 0

    def nonce_and_salt(self) -> tuple[str, str]:
        size = NONCE_BYTES + SALT_BYTES
        if self._at + size > len(self._page):
            self._page, self._at = os.urandom(self.PAGE - self.PAGE % size), 0
        raw = self._page[self._at : self._at + size].hex()
        self._at += size
        return raw[: 2 * NONCE_BYTES], raw[2 * NONCE_BYTES :]


def log_failure(flight: Flight, result: AttemptResult, took_ms: int) -> None:
    log.info(
        "delivery to %s at %s failed: %s (%d events, %d ms)",
        flight.client, flight.host, result.text, len(flight.every_entry), took_ms,
    )  # fmt: skip


def traced_body(
    flight: Flight, events: list[codec.QueuedEvent] | None = None
) -> tuple[bytes, TraceContext | None]:
    """Routemaster's JSON array; with `id` on each event when the subscription asked, and
    then each event's trace context too (`traceparent`, `tracestate`) when it had one.
    Second: the context of the first event that has one, which the attempt propagates
    (docs/tracing.md). `events`, when given, receives every event (spans want them).
    A flight its transforms shaped sends what they made (app/delivery/shaping.py)."""
    shapes = []
    first = None
    shaped = flight.shaped[0] if flight.shaped else None
    pairs = (
        zip(flight.entries, map(codec.unpack_entry, flight.entries), strict=True)
        if shaped is None
        else zip(shaped.entries, shaped.events, strict=True)
    )
    for entry, event in pairs:
        shape = event.delivery()
        if event.traceparent is not None and first is None:
            first = event.trace
        if flight.event_ids:
            shape["id"] = event_ids.of_entry(entry, event)
            if event.traceparent is not None:
                shape["traceparent"] = event.traceparent
                if event.tracestate is not None:
                    shape["tracestate"] = event.tracestate
        if events is not None:
            events.append(event)
        shapes.append(shape)
    return json.dumps(shapes, separators=(",", ":")).encode(), first


@dataclass(frozen=True)
class Finishing:
    """An ack or fail about to be asked: the call, and what reading its reply needs."""

    call: calls.Call[Settled]
    result: AttemptResult
    nonce: str  # of the delivery the ack begins or takes, if any
    group: list[Located]  # the queues the ack sweeps
    took_ms: int

    @property
    def done(self) -> Kind:
        """The outcome a settled step means: a wait asked for (429/503 with Retry-After)
        or an attempt held back defers, it does not fail."""
        if self.result.ok:
            return Kind.DELIVERED
        return Kind.FAILED if self.result.wait_ms is None else Kind.DEFERRED


def shaped_args(flight: Flight) -> bytes:
    """deliver_ack's ARGV[19] and deliver_fail's ARGV[26]: what the flight's transforms
    made, or b"" when none ran."""
    if not flight.shaped:
        return b""
    s = flight.shaped[0]
    changed = any(a is not b for a, b in zip(s.sent, s.entries, strict=True))
    return codec.pack_shaped(
        s.sent, s.entries if changed else [], s.dropped, s.failed,
        flight.transform_version, MAX_DEAD_LETTERS, s.deferred,
    )  # fmt: skip


class Plan:
    """The steps' decisions, without their I/O (AsyncDelivery's base): which calls to
    make and how to read their replies."""

    def __init__(
        self, keys: Keys, settings: Settings, max_run: int = MAX_RUN, clock: Clock = now_ms
    ) -> None:
        self._keys = keys
        self._clock = clock
        self._settings = settings
        self._max_run = max_run
        self._draws = Draws()
        self._retry = calls.Retry(
            settings.retry_first_ms, settings.max_backoff_ms, settings.circuit_failures,
            settings.circuit_probe_ms, settings.retry_lone_ms, settings.retry_alive_ms,
            settings.circuit_outage_ms,
        )  # fmt: skip

    def finishing(
        self, flight: Flight, result: AttemptResult, go_on: bool, sweep: Sequence[Located]
    ) -> Finishing:
        """The ack (2xx, or nothing left to send) or fail of `flight` for `result`."""
        took_ms = int((time.monotonic() - flight.began) * 1000)
        record = self.record(flight)
        if not result.ok:
            fail = self.fail_args(result, record, took_ms, flight)
            call = calls.fail(self._keys, flight, self._clock(), fail)
            return Finishing(call, result, "", [], took_ms)
        group = self.sweep_group(flight.pid, sweep)
        ack = self.ack_args(flight, took_ms, go_on, group, result, record)
        call = calls.ack(self._keys, flight, self._clock(), ack)
        return Finishing(call, result, ack.nonce, group, took_ms)

    def read_settled(
        self,
        f: Finishing,
        flight: Flight,
        reply: Settled,
        issued: float,
        confirmed: bool = True,
    ) -> Finished:
        """The settle's reply; `issued`, when its script was sent (Flight.issued);
        `confirmed`, whether its replicas were seen to hold it (flight.begun)."""
        result = f.result
        if result.held_back:
            log.debug("%s held back %d ms: the failing share, or its origin's connections, "
                      "were full", flight.client, result.wait_ms)  # fmt: skip
        elif result.wait_ms is not None:
            log.info("%s at %s asked to wait %d ms (%s)", flight.client, flight.host,
                     result.wait_ms, result.code)  # fmt: skip
        elif not result.ok:
            log_failure(flight, result, f.took_ms)
            if reply.opened:
                log.warning(
                    "circuit of %s opened after %d failures in a row: one attempt every "
                    "%g s until one succeeds", flight.client,
                    self._retry.circuit_failures, self._retry.probe_ms / 1000,
                )  # fmt: skip
        return settled(flight, result.text, f.done, reply, f.nonce, f.group, issued, confirmed)

    def ack_args(
        self,
        flight: Flight,
        took_ms: int,
        go_on: bool,
        group: list[Located],
        result: AttemptResult,
        record: calls.Record,
    ) -> calls.Ack:
        """What an acknowledgement asks besides the flight (shared with the engine)."""
        nonce, salt = self._draws.nonce_and_salt() if go_on or group else ("", "")
        sweep = calls.Sweep.of(group, flight.worker) if group else calls.NO_SWEEP
        return calls.Ack(
            self._settings.hp_heal_rate,
            took_ms,
            self._log_maxlen,
            nonce,
            salt,
            go_on,
            sweep,
            result,
            record,
            shaped_args(flight),
            # the broker confirmed them whole (all, unless the flight stopped early)
            max(0, flight.batches_confirmed() - 1) if flight.more else 0,
        )

    def fail_args(
        self, result: AttemptResult, record: calls.Record, took_ms: int, flight: Flight
    ) -> calls.Fail:
        """What a failure asks besides the flight; for a broker flight of gathered
        batches, also how many the broker confirmed whole before the failing one (they
        are acknowledged in the same step) and what their ack needs."""
        settings = self._settings
        confirmed = flight.batches_confirmed() if flight.more and result.outcome else 0
        return calls.Fail(
            settings.hp_damage_rate, random.uniform(1.0, 1.5), result, MAX_DEAD_LETTERS,
            self._retry, record, took_ms, shaped_args(flight), confirmed, self._log_maxlen,
            settings.hp_heal_rate,
        )  # fmt: skip

    @property
    def _log_maxlen(self) -> int:
        """The delivery log's approximate MAXLEN an acknowledgement writes with; 0: off."""
        return self._settings.delivery_log_maxlen if self._settings.delivery_log else 0

    def record(self, flight: Flight) -> calls.Record:
        """What the attempt log keeps of this flight's attempt (app/models/attempts.py)."""
        settings = self._settings
        if not settings.attempt_log and not settings.attempt_stream_maxlen:
            return calls.NO_RECORD
        count, oldest, stream_maxlen = attempts.kept(settings, self._clock())
        return calls.Record(count, oldest, bytes(flight.answer), stream_maxlen)

    def sweep_group(self, pid: str, sweep: Sequence[Located]) -> list[Located]:
        """The queues of `sweep` an ack of partition `pid`'s delivery may take from: one
        script names one node's keys (every shard on one Redis; on a cluster, one slot)."""
        home = self._keys.home(pid).base
        for group in script_groups(list(sweep)):
            if any(q.place.base == home for q in group):
                return group
        return []
