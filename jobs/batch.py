"""`batch [subscriber]`: deliver the subscriber's next due batch.

The job settles itself (the delivery scripts move it out of the pending list), because
whether it runs again, and when, depends on what is still queued at that very moment.
"""

from __future__ import annotations

from app.services.deliver import Delivery
from jobs.context import JobContext


def run(ctx: JobContext, args: list, worker: str, job: bytes) -> bool:
    (token,) = args
    Delivery(ctx.redis, ctx.keys, ctx.scripts, ctx.settings, ctx.http, ctx.deadlines).run(
        token, worker, job
    )
    return True
