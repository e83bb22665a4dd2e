"""Every job by name. A handler returns True when it settled its job itself (deliveries),
False when the worker loop should acknowledge it."""

from __future__ import annotations

from collections.abc import Callable

from jobs import batch, maintenance, scrub
from jobs.context import JobContext

Handler = Callable[[JobContext, list, str, bytes], bool]

JOBS: dict[str, Handler] = {
    "batch": batch.run,
    "scrub_queues": scrub.scrub_queues,
    "scrub_workers": scrub.scrub_workers,
    "monitor": maintenance.monitor,
    "expire": maintenance.expire,
    "autodrop": maintenance.autodrop,
}
