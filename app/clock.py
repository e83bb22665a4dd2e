"""The hosts' wall clock in milliseconds, the one definition busbar's Python uses.

Event times, deadlines and the ms arguments the Lua scripts take come from here; liveness
(heartbeats, the scrub) is judged on Redis's own clock instead (`lib/jobs.lua`), so two
hosts that disagree cannot take a live worker for dead.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
