"""`busbar spark replay`'s arguments, apart from spark/replay.py so that parsing a
command line never imports PySpark (spark/cli.py loads the job only once it runs)."""

from __future__ import annotations

import argparse
from typing import Any

WINDOW = 10_000  # events queued for the target at most before the next step (default)
STEP = 500  # events one step (one replay_queue.lua call) queues at most: well within 50 ms


def add_parser(jobs: Any) -> None:
    replay = jobs.add_parser("replay", help="lake -> a subscriber's queue, exactly once")
    replay.add_argument("--lake", required=True, help="the ingest's --output directory")
    replay.add_argument("--since", help="event time t from (ISO 8601, UTC, or epoch ms)")
    replay.add_argument("--until", help="event time t before (ISO 8601, UTC, or epoch ms)")
    replay.add_argument("--topic", action="append", default=[], help="a topic (repeatable)")
    replay.add_argument("--type", help="an event type")
    replay.add_argument("--from-subscriber", metavar="NAME", help="events NAME was delivered")
    replay.add_argument("--url-prefix", help="events whose url starts so")
    replay.add_argument("--dry-run", action="store_true", help="count, queue nothing")
    replay.add_argument("--to", metavar="NAME", help="the subscriber to queue them for")
    replay.add_argument("--lane", type=int, choices=range(11), metavar="N",
                        help="queue every event in lane N (0-9, 10 = no priority)")  # fmt: skip
    replay.add_argument("--id", help="the replay's id (default: from selection and target)")
    replay.add_argument("--restart", action="store_true", help="forget a saved position")
    replay.add_argument("--window", type=int, default=WINDOW, help=f"default {WINDOW:,}")
    replay.add_argument("--step", type=int, default=STEP, help=argparse.SUPPRESS)
    replay.add_argument("--master", help="Spark master URL (default local[*])")
    replay.add_argument("--redis-url", help="default BUSBAR_REDIS_URL")
    replay.add_argument("--key-prefix", help="default BUSBAR_KEY_PREFIX")
