"""Monitor, Expire and Autodrop: aux jobs pushed by the worker's tickers."""

from __future__ import annotations

import logging
import time
from typing import Any

from app.errors import Forbidden
from app.models.keys import AUX
from app.models.pausing import Pausing
from app.models.retention import Retention
from app.models.trash import Trash
from app.services import metrics, samples
from app.services.erasure import requeue_running
from app.services.ingest import Ingest
from app.services.operations import TOPIC, Operations
from app.services.retention import Retiring
from app.services.shedding import Shedding
from jobs.context import JobContext

log = logging.getLogger("busbar.monitor")


def _shedding(ctx: JobContext) -> Shedding:
    return Shedding(ctx.redis, ctx.keys, ctx.scripts, ctx.settings)


def monitor(ctx: JobContext, args: list[Any], worker: str, job: bytes) -> bool:
    samples.record(ctx.redis, ctx.keys)  # the console's per-minute charts
    if ctx.settings.monitor_sink == "print" and log.isEnabledFor(logging.INFO):
        snapshot = metrics.collect(ctx.redis, ctx.keys, ctx.settings, metrics.LINE_SUBSCRIBERS)
        log.info("metrics %s", metrics.one_line(snapshot))
    return False


def expire(ctx: JobContext, args: list[Any], worker: str, job: bytes) -> bool:
    """Also applies payload retention (app/services/retention.py), finishes subscriber
    deletions a crash interrupted (their trash), queues again the job of an erasure
    that lost it (erasure.requeue_running), and pauses the subscribers whose circuit
    has stayed open BUSBAR_AUTO_PAUSE_S (looked at every hundredth of that:
    Pausing.stale_due)."""
    removed = _shedding(ctx).expire(int(time.time() * 1000))
    if removed:
        log.info("expired %d events", removed)
    retention = Retention(ctx.redis, ctx.keys, ctx.scripts, ctx.settings.payload_retention_s)
    retired = Retiring(ctx.redis, ctx.keys, ctx.scripts, retention).apply(int(time.time() * 1000))
    if retired.deadletters or retired.stream_entries:
        log.info("retention: %d dead letters and %d log entries past their topics' retention "
                 "removed", retired.deadletters, retired.stream_entries)  # fmt: skip
    if requeue_running(ctx.redis, ctx.keys, ctx.queue(AUX, None), int(time.time() * 1000)):
        log.info("queued again the job of an erasure a worker had dropped")
    if Trash(ctx.redis, ctx.keys, ctx.scripts).purge_all():
        log.info("purged the batches of a deleted subscriber left by an interrupted delete")
    after = ctx.settings.auto_pause_s
    pausing = Pausing(ctx.redis, ctx.keys, ctx.scripts)
    if after and pausing.stale_due(after):
        for name in pausing.pause_stale(int(time.time() * 1000), after):
            log.warning("paused %s: its circuit has been open for %d s or more; resume it "
                        "once its endpoint is mended", name, after)  # fmt: skip
    return False


def autodrop(ctx: JobContext, args: list[Any], worker: str, job: bytes) -> bool:
    _shedding(ctx).autodrop(int(time.time() * 1000))
    return False


def operations(ctx: JobContext, args: list[Any], worker: str, job: bytes) -> bool:
    """Publish the operational events noted since the last run (app/services/operations.py)."""
    ingest = Ingest(ctx.redis, ctx.keys, ctx.scripts, ctx.settings)
    try:
        Operations(ctx.redis, ctx.keys, ingest, ctx.settings.public_url).relay()
    except Forbidden:
        log.error("%s belongs to a client that published to it before busbar reserved it: "
                  "delete the topic as root (DELETE /topics/%s) so busbar can publish its "
                  "operational events", TOPIC, TOPIC)  # fmt: skip
    return False
