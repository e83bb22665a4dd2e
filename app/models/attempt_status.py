"""How an attempt's status is written, where a wait travels with it: `503 retry-after
2000` (a back-pressure answer's code and the wait it asked, ms) or `held_back
retry-after 1000` (an attempt the engine did not send, and when to try again).

The send step writes it (app/delivery/backpressure.py), the ack-or-fail decision and the
attempt log read it back (app/delivery/plan.py, app/models/attempts.py): the format is
the attempt log's, so it is defined here, beneath both.
"""

from __future__ import annotations

HELD_BACK = "held_back"  # not sent: the failing share (share.py) or the origin (gate.py) full
MARK = " retry-after "


def waiting_for(why: str, wait: int) -> str:
    """A wait as a status: a back-pressure answer's code, or `held_back` for an attempt
    the engine did not send (app/delivery/share.py, app/delivery/gate.py)."""
    return f"{why}{MARK}{wait}"


def asked_wait(status: str) -> int | None:
    """The wait a status written by waiting_for() carries, ms; None for any other status."""
    why, mark, wait = status.partition(MARK)
    return int(wait) if mark and wait.isdigit() and (why.isdigit() or why == HELD_BACK) else None
