"""The open-files limit a process needs: a descriptor per delivery in flight (worker),
per client connection (web).

Many systems start processes with a soft limit of 1,024 open files and a much higher
hard limit. A worker with thousands of delivery slots would meet EMFILE mid-delivery,
which looks like a failing subscriber, and a web process would stop accepting clients;
so each raises its soft limit to what its concurrency needs (up to the hard limit) at
start, and says in one line when even the hard limit cannot carry it.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)
SPARE = 256  # Redis connections, kept-alive callback connections, logs, the rest


def open_files_for(
    concurrency: int, setting: str = "BUSBAR_DELIVERY_CONCURRENCY", each: int = 1
) -> int:
    """Raise the soft RLIMIT_NOFILE toward `each` x `concurrency` + SPARE; returns the
    new soft limit. `setting` is what the warning names; `each`: descriptors a unit of
    it may hold (a worker's slot, and a delivery parked in its place: 2)."""
    needed = each * concurrency + SPARE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return soft
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        log.warning("could not raise the open-files limit from %d: %s", soft, exc)
        target = soft
    if target < needed:
        log.warning(
            "open-files limit %d cannot carry %s=%d (needs about %d): raise the hard "
            "limit (ulimit -n, LimitNOFILE=) or lower the concurrency",
            target, setting, concurrency, needed,
        )  # fmt: skip
    return target
