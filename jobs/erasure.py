"""The aux job `erase`: carries out one erasure (app/services/erasure.py) a slice of
time at a time, so the maintenance jobs in line behind it (Expire, Autodrop, the scrubs)
keep their turn; it puts itself back in line until the erasure is done. A worker killed
mid-slice gives the job back (the scrub) and the next one goes on where it was."""

from __future__ import annotations

import logging
from typing import Any

from app.clock import now_ms
from app.errors import JobLost
from app.models.keys import AUX
from app.services.erasure import Eraser
from jobs.context import JobContext

log = logging.getLogger("busbar.erasure")
SLICE_S = 2.0  # work done before the job goes back in line
WAIT_MS = {  # before the next slice, by what is left
    "more": 0,
    "waiting": 1000,  # another pass, while a batch in flight holds the entity
    "lakes": 10_000,  # a lake's ingest erases it between its micro-batches
}


def erase(ctx: JobContext, args: list[Any], worker: str, job: bytes) -> bool:
    erasure_id = str(args[0])
    progress = Eraser(ctx.redis, ctx.keys, ctx.scripts).run(erasure_id, SLICE_S, now_ms())
    if progress == "done":
        log.info("erasure %s done", erasure_id)
        return False
    later = now_ms() + WAIT_MS[progress]
    if not ctx.queue(AUX, None).settle(worker, job, now_ms(), later):
        raise JobLost("the job was scrubbed while it ran")
    return True
