"""Back-pressure: a subscriber that answers 429 or 503 with `Retry-After` asks the bus to
wait, and is not failing.

Such an answer is no failed attempt: no health points lost, not counted toward
`max_attempts` (so an endpoint shedding load during a deploy never dead-letters its
events), and the batch stays at the head of its lane, so delivery resumes in order. The
wait is what the header says, in seconds or as an HTTP date (RFC 9110, 10.2.3), at least
MIN_WAIT_MS (an endpoint answering `Retry-After: 0` for ever must not be called in a
tight loop) and at most BUSBAR_MAX_RETRY_AFTER_S. Without the header, or with one that
is neither form, 429 and 503 are failures like any other status.

The send step keeps the wait in the attempt's result (app/models/attempt_result.py's
`answered`), which carries it to the ack-or-fail decision and deliver_fail as a value of
its own; the attempt log shows it as `503 retry-after 2000` and in `retry_after_ms`.
"""

from __future__ import annotations

import datetime
import email.utils
import time

from app.models.validate import digits

ASKING = frozenset({429, 503})
MIN_WAIT_MS = 1000


def wait_ms(status: int, header: str | None, most_s: int, now: float | None = None) -> int | None:
    """How long `status` with a Retry-After `header` asks to wait (ms, within bounds),
    or None when it does not: another status, no header, or one that says nothing."""
    if status not in ASKING or header is None:
        return None
    text = header.strip()
    if digits(text):
        seconds = float(text)
    else:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # an HTTP date is GMT, whether it says so or not
            when = when.replace(tzinfo=datetime.UTC)
        seconds = when.timestamp() - (time.time() if now is None else now)
    return int(max(MIN_WAIT_MS, min(seconds * 1000, most_s * 1000)))
