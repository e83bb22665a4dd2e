"""`batch [subscriber]`: deliver the subscriber's next due batch.

The job settles itself (deliver.lua moves it out of the pending list), because whether
it runs again, and when, depends on what is still queued at that very moment.
"""

from __future__ import annotations

import logging

from app.services.deliver import Delivery
from jobs.context import JobContext

log = logging.getLogger(__name__)


def run(ctx: JobContext, args: list, worker: str, job: bytes) -> bool:
    (token,) = args
    outcome = Delivery(ctx.redis, ctx.keys, ctx.scripts, ctx.settings, ctx.session).run(
        token, worker, job
    )
    if outcome.kind in ("delivered", "failed"):
        log.debug(
            "batch %s for %s: %s (%s events)", outcome.kind, token, outcome.status, outcome.events
        )
    return True
