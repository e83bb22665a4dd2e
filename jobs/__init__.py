"""Every maintenance job (queue aux) by name; deliveries (queue main) are the delivery
engine's (app/delivery). A handler returns True when it settled its job itself,
False when the worker loop should acknowledge it.

Modules (docs/layout.md is the whole map; spec/test_map.py keeps both true):

    context.py          what a job needs, one per worker thread
    maintenance.py      Monitor, Expire and Autodrop
    erasure.py          an erasure, a slice of time at a time
    scrub.py            ScrubQueues and ScrubWorkers
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobs import erasure, maintenance, scrub
from jobs.context import JobContext

Handler = Callable[[JobContext, list[Any], str, bytes], bool]

JOBS: dict[str, Handler] = {
    "scrub_queues": scrub.scrub_queues,
    "scrub_workers": scrub.scrub_workers,
    "monitor": maintenance.monitor,
    "expire": maintenance.expire,
    "autodrop": maintenance.autodrop,
    "operations": maintenance.operations,
    "erase": erasure.erase,
}
