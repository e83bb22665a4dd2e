"""`batch [subscriber]`: deliver the subscriber's next due batch.

The job settles itself (the delivery scripts move it out of the pending list), because
whether it runs again, and when, depends on what is still queued at that very moment.
A worker thread's sweep may have begun the delivery already as it took the job
(deliver_take): `resume` goes on from there.
"""

from __future__ import annotations

from app.services.deliver import Delivery, Flight, Outcome
from jobs.context import JobContext


def delivery(ctx: JobContext) -> Delivery:
    return Delivery(ctx.redis, ctx.keys, ctx.scripts, ctx.settings, ctx.http, ctx.deadlines)


def run(ctx: JobContext, args: list, worker: str, job: bytes) -> bool:
    return resume(ctx, args, worker, job, None)


def resume(
    ctx: JobContext, args: list, worker: str, job: bytes, first: Flight | Outcome | None
) -> bool:
    (token,) = args
    delivery(ctx).run(token, worker, job, first)
    return True
