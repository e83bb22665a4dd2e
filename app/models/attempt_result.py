"""What one delivery attempt came to, as one value built where the answer is read.

The send step (app/delivery/steps.py) makes an AttemptResult from the callback's answer,
or from why there was none, or from why the engine did not send at all; the ack-or-fail
decision (app/delivery/plan.py) reads its parts, the scripts take them as arguments of
their own (deliver_ack, deliver_fail: the outcome class, the wait, whether a request
was made), and `text` is its one written form: the attempt log's and the dead letters'
`status`, the circuit's `last_status`, the logs. Nothing reads a wait or a class back
out of `text`. The text is `503 retry-after 2000` for a back-pressure answer (its code,
and the wait it asked, ms), `held_back retry-after 1000` for an attempt not sent (the
failing share or the origin full, a begin not on a replica yet, a token being fetched),
the code alone for any other answer, or the reason when there was none.

Outcome classes are the attempt log's filter's (app/models/attempts.py).
"""

from __future__ import annotations

from dataclasses import dataclass

HELD_BACK = "held_back"  # not sent: the failing share (share.py) or the origin (gate.py) full
MARK = " retry-after "
# no request was made: the routes' transforms left nothing of the batch to send, and it
# is acknowledged (app/delivery/shaping.py)
NONE_SENT = "none_sent"
ABANDONED = "abandoned"  # begun, never settled: its worker died or lost Redis (the scrub)
# the bus could not open a credential of the subscription, no request was made: the bus's
# own fault (a key), never the callback's, so not a `connection` (app/models/sealed.py)
UNSEALABLE = "secret_unsealable"
# the callback's address is one the bus will not call (app/models/callback_policy.py)
REFUSED_ADDRESS = "refused_address"
# no OAuth2 token could be had, no request was made (app/delivery/token_fetch.py)
AUTH_FAILED = "auth_failed"
# a broker destination took every message of the batch (docs/destinations.md): no HTTP
# status, and a success, classed with the 2xx
BROKER_CONFIRMED = "confirmed"
TIMEOUTS = frozenset({"timeout", "cut_slow"})
OUTCOMES = ("2xx", "3xx", "4xx", "5xx", "timeout", "connection", "abandoned", UNSEALABLE)


@dataclass(frozen=True, slots=True)
class AttemptResult:
    text: str  # its one written form (above)
    outcome: str  # its class (OUTCOMES); '' when no request was made (held back, none sent)
    code: int | None = None  # the HTTP status answered
    wait_ms: int | None = None  # the wait a 429/503 asked for, or before an unsent retry
    ok: bool = False  # acknowledged: a 2xx, or nothing was left to send

    @property
    def held_back(self) -> bool:
        """The engine did not send it: no attempt counted, no health lost."""
        return self.wait_ms is not None and self.code is None


def answered(code: int, wait_ms: int | None = None) -> AttemptResult:
    """The callback's answer; `wait_ms`, what its Retry-After asked (backpressure.py)."""
    text = str(code) if wait_ms is None else f"{code}{MARK}{wait_ms}"
    return AttemptResult(text, f"{code // 100}xx", code, wait_ms, 200 <= code < 300)


def failed(reason: str) -> AttemptResult:
    """A request that got no answer, or was refused before one (app/services/failure.py's
    words, or the bus's own: REFUSED_ADDRESS, AUTH_FAILED, UNSEALABLE)."""
    return AttemptResult(reason, outcome_of_reason(reason))


def held_back(wait_ms: int) -> AttemptResult:
    """An attempt the engine did not send, tried again after `wait_ms`."""
    return AttemptResult(f"{HELD_BACK}{MARK}{wait_ms}", "", None, wait_ms)


NOTHING_SENT = AttemptResult(NONE_SENT, "", ok=True)
CONFIRMED = AttemptResult(BROKER_CONFIRMED, "2xx", ok=True)
OK = answered(200)


def outcome_of_reason(reason: str) -> str:
    """The class of an attempt that got no status: a broker's confirmation, timeouts,
    the bus's own, or a connection's failure."""
    if reason == BROKER_CONFIRMED:
        return "2xx"
    if reason in (ABANDONED, UNSEALABLE):
        return reason
    return "timeout" if reason in TIMEOUTS else "connection"
