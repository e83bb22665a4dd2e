"""`batch [subscriber]`: deliver the subscriber's next due batch.

The job settles itself (the delivery scripts move it out of the pending list), because
whether it runs again, and when, depends on what is still queued at that very moment.
On queue main a worker thread runs it through its own Delivery instead
(workers/runner.py): its sweep may have begun the delivery already as it took the job
(deliver_take), and the acknowledgement that ends the run takes the thread's next job.
"""

from __future__ import annotations

from app.services.deliver import Delivery
from jobs.context import JobContext


def delivery(ctx: JobContext) -> Delivery:
    return Delivery(ctx.redis, ctx.keys, ctx.scripts, ctx.settings, ctx.http, ctx.deadlines)


def run(ctx: JobContext, args: list, worker: str, job: bytes) -> bool:
    (token,) = args
    delivery(ctx).run(token, worker, job)
    return True
