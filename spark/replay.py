"""`busbar spark replay`: events from the lake queued again, to one subscriber.

The lake (spark/lake.py) is read with Spark; the selection (spark/selection.py) picks
events, one per event id, in their original order; the driver walks them in that order
(toLocalIterator: one partition at a time, never the whole selection in memory) and
queues them in steps through app/services/replay.py, whose record makes the replay
exactly once into the queue and resumable: the same command again (same selection and
target, or the same --id) resumes where the record stands, whatever stopped it.

Rows an erasure under way names (its `state` still running) are never selected: the
workers erase Redis first and the lake later, and a replay in between must not bring
the entity's events back (spark/selection.py's without_erased).

A replay keeps at most --window events queued for its target (all lanes, live ones
included) before its next step: live events published meanwhile wait behind at most
that many replayed ones, and a subscriber that is down is not buried.
"""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import json
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from app.clock import now_ms
from app.errors import BusbarError, NotFound
from app.lua import Scripts
from app.models.keys import Keys
from app.services.replay import Replays, Target, replay_id
from config.settings import Settings
from spark import lake_erase
from spark.connect import open_client
from spark.errors import SelectionError, SparkIngestError
from spark.lake import EVENTS, events
from spark.selection import (
    Selection,
    Summary,
    T,
    instant,
    once_each,
    ordered,
    published_columns,
    replay_rows,
    summary,
    without_erased,
)

PROGRESS_S = 5.0  # a progress line at most this often
# bytes of events one step queues at most (and --step events): a step is one script,
# which must stay well within the 50 ms a script may take (docs/internals.md)
STEP_BYTES = 1 << 20
ROWS_PER_PART = 250_000  # rows of the selection per partition of its sort, at most about


def say(line: str) -> None:
    print(f"busbar spark replay: {line}", flush=True)


def selection_of(args: argparse.Namespace) -> Selection:
    """The selection as asked; SelectionError (exit 2) for what cannot be one."""
    lake = str(args.lake)
    if "://" not in lake and not (Path(lake) / EVENTS).is_dir():
        raise SelectionError(f"no lake at {lake} ({lake}/{EVENTS} is missing)")
    if not args.dry_run and not args.to:
        raise SelectionError("say which subscriber to queue them for (--to NAME), or --dry-run")
    if args.step < 1 or args.window < 1:
        raise SelectionError("--step and --window must be at least 1")
    return Selection(
        since_ms=None if args.since is None else instant(args.since),
        until_ms=None if args.until is None else instant(args.until),
        topics=tuple(args.topic), type=args.type,
        from_subscriber=args.from_subscriber, url_prefix=args.url_prefix,
    )  # fmt: skip


def as_dict(selection: Selection) -> dict[str, Any]:
    return {k: v for k, v in vars(selection).items() if v not in (None, ())}


def print_summary(found: Summary) -> None:
    for topic, day, count in found.counts:
        say(f"  {topic} {day}: {count:,} events")
    for label, row in (("first", found.first), ("last", found.last)):
        if row is not None:
            say(f"  {label}: {row['topic']} {row['type']} {row['url']} t={row['t']} ({row['id']})")


def check_routes(target: Target, topics: set[str], lane: int | None) -> None:
    """Every topic to replay is one the target routes, or --lane says where they go."""
    if lane is not None:
        return
    for topic in sorted(topics - set(target.routes)):
        raise SelectionError(
            f"subscriber {target.name!r} does not route topic {topic!r}: "
            "subscribe it, or give --lane N"
        )


class Stop(Protocol):
    """spark/cli.py's StopRequest: SIGINT/SIGTERM recorded, acted on between steps."""

    def arm(self) -> None: ...

    @property
    def requested(self) -> bool: ...


def run_replay(args: argparse.Namespace, settings: Settings, stop: Stop) -> int:
    """Exit status: 0 done (or nothing selected, or stopped by a signal: rerun resumes),
    2 for a selection or target that cannot be (one line), 1 for a failure underway."""
    started = time.monotonic()
    selection = selection_of(args)
    url = args.redis_url or settings.effective_redis_url
    client = open_client(url, settings.redis_cluster, timeout=30)
    keys = Keys(
        settings.key_prefix if args.key_prefix is None else args.key_prefix, settings.shards
    )
    replays = Replays(client, keys, Scripts(client))
    try:
        target = replays.target(args.to) if args.to else None
    except NotFound as exc:
        raise SelectionError(exc.message) from None
    asked = as_dict(selection)
    the_id = args.id or (replay_id(asked, target.name) if target else "")
    if target is not None:  # topics named: said before Spark starts (and prints its own)
        check_routes(target, set(selection.topics), args.lane)
    as_of = now_ms()  # the lake as it is now; a resumed replay keeps its first start's
    if target is not None and not args.restart:
        as_of = int(replays.saved(target, the_id).get("as_of", as_of))
    selection = dataclasses.replace(selection, delivered_before_ms=as_of)
    from spark.session import get_session

    spark = get_session(args.master, "busbar-replay", {"spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    stop.arm()  # again: the SparkContext puts in a SIGINT handler of its own
    # rows of an erasure under way are left out (the lake may not have erased them yet)
    lake = without_erased(events(spark, args.lake), lake_erase.running(client, keys))
    found = summary(lake, selection, ends=args.dry_run or target is None)
    if found.total == 0:
        say(f"nothing selected in {args.lake} ({json.dumps(asked)})")
        return 0
    say(f"{found.total:,} events selected")
    if args.dry_run or target is None:
        print_summary(found)
        return 0
    check_routes(target, {t for t, _, _ in found.counts}, args.lane)
    fields = {
        "as_of": as_of, "by": f"{getpass.getuser()}@{socket.gethostname()}",
        "lake": str(args.lake), "selection": json.dumps(asked), "selected": found.total,
        "lane": -1 if args.lane is None else args.lane,
    }  # fmt: skip
    state, position = replays.start(the_id, target, fields, now_ms(), args.restart)
    say(f"replay {the_id} to {target.name}: {state} at {position:,} of {found.total:,}")
    # the sort's partitions are fetched one job each: a few large ones, not Spark's 200
    # (about 3 s of 9 for 400,000 events), each small enough for the driver to hold
    parts = max(2 * spark.sparkContext.defaultParallelism, found.total // ROWS_PER_PART)
    spark.conf.set("spark.sql.shuffle.partitions", str(parts))
    prepared = ordered(lake, selection).select(*published_columns()).rdd.mapPartitions(replay_rows)
    rows = once_each(prepared.toLocalIterator(prefetchPartitions=True), t_at=T)
    walk = Walk(replays, the_id, target, args, settings.default_ttl, position)
    try:
        done = walk.run(rows, found.total, lambda: stop.requested)
    except BusbarError as exc:
        replays.finish(the_id, target, "failed", now_ms(), exc.message)
        raise SparkIngestError(exc.message) from None
    if not done:
        replays.finish(the_id, target, "stopped", now_ms(), "stopped by a signal")
        say(f"replay {the_id}: stopped at {walk.position:,} of {found.total:,}; "
            "the same command resumes it")  # fmt: skip
        return 0
    replays.finish(the_id, target, "done", now_ms())
    say(f"replay {the_id}: {walk.queued:,} events queued to {target.name}"
        f"{f', {walk.skipped:,} not routed' if walk.skipped else ''} "
        f"({time.monotonic() - started:.1f} s, Spark's start included)")  # fmt: skip
    return 0


class Walk:
    """The selection walked in order from the saved position, queued in steps."""

    def __init__(self, replays: Replays, the_id: str, target: Target,
                 args: argparse.Namespace, default_ttl_s: int, position: int) -> None:  # fmt: skip
        self.replays, self.id, self.target = replays, the_id, target
        self.lane, self.step_size, self.window = args.lane, args.step, args.window
        self.default_ttl_s = default_ttl_s
        self.position = position
        self.queued = self.skipped = 0
        self._said = time.monotonic()

    def run(self, rows: Iterator[Sequence[Any]], total: int, stop: Callable[[], bool]) -> bool:
        """Queue every row after the position; False when a stop was asked first."""
        batch: list[bytes] = []
        consumed, route, size = 0, None, 0
        for n, (_, topic, type_, _, event) in enumerate(rows):  # selection.replay_rows
            if n < self.position:
                continue
            where = self.target.lane_of(topic, type_, self.lane, self.default_ttl_s, event)
            full = len(batch) >= self.step_size or size >= STEP_BYTES
            if batch and (where != route or full):
                if not self._step(route, consumed, batch, total, stop):
                    return False
                batch, consumed, size = [], 0, 0
            consumed += 1
            if where is None:
                self.skipped += 1
                continue
            route = where
            batch.append(event)
            size += len(event)
        return not consumed or self._step(route, consumed, batch, total, stop)

    def _step(self, route: tuple[int, int] | None, consumed: int, batch: list[bytes],
              total: int, stop: Callable[[], bool]) -> bool:  # fmt: skip
        while self.replays.queued_for(self.target) >= self.window:
            if stop():
                return False
            time.sleep(0.1)
        if stop():
            return False
        lane, ttl = route if route is not None else (0, 0)
        self.position = self.replays.step(
            self.id, self.target, self.position, consumed, lane, ttl, batch, now_ms()
        )
        self.queued += len(batch)
        if time.monotonic() - self._said >= PROGRESS_S:
            self._said = time.monotonic()
            say(f"replay {self.id}: {self.position:,} of {total:,}")
        return True
