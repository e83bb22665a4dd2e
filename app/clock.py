"""The hosts' wall clock in milliseconds, the one definition busbar's Python uses.

Event times, deadlines and the ms arguments the Lua scripts take come from here (a
delivery's steps through a Clock they are given, this one unless a test sets its own); liveness
(heartbeats, the scrub) is judged on Redis's own clock instead (`lib/jobs.lua`), so two
hosts that disagree cannot take a live worker for dead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from app.errors import InvalidInput
from app.models.validate import digits

# what a delivery's steps ask the time of: now_ms in every process; a test passes a clock
# it sets (spec/clock.py), so it moves past a backoff or a TTL instead of sleeping
Clock = Callable[[], int]


def now_ms() -> int:
    return int(time.time() * 1000)


def instant(text: str) -> int:
    """Epoch milliseconds from ISO 8601 (UTC unless it names a zone) or epoch ms: how a
    time is written to busbar's API and commands."""
    if digits(text):
        return int(text)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"{text!r} is neither ISO 8601 nor epoch milliseconds") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)
