"""`busbar spark ...` (also `python -m spark.cli ...`): Spark jobs over the delivery log
and the attempt stream.

    busbar spark ingest --output DIR --checkpoint DIR (--available-now | --interval S)
        [--table events|attempts]... [--master URL] [--redis-url URL] [--key-prefix P]
        [--partitions N] [--fail-on-data-loss] [--max-batches-per-trigger N]
        [--erase-now] [--vacuum-hours H]
    busbar spark migrate --output DIR [--checkpoint DIR]
    busbar spark erase --output DIR [--erase-now] [--vacuum-hours H] [--redis-url URL]
        [--key-prefix P]
    busbar spark replay --lake DIR [--since T] [--until T] [--topic T]... [--type T]
        [--from-subscriber NAME] [--url-prefix P] (--dry-run | --to NAME [--lane N]
        [--id ID] [--restart] [--window N]) [--master URL] [--redis-url URL]

Redis URL, key prefix and partition count default to busbar's own settings
(BUSBAR_REDIS_URL, BUSBAR_KEY_PREFIX, BUSBAR_SHARDS), read by `config`
like every other setting, so the job reads the streams the workers write; with no URL
set, a `busbar dev` running in this directory supplies its own (config/devstate.py).

Redis is asked first, before a JVM starts: unreachable, it is one line and exit 2, not
a Java trace 17 s later. SIGINT and SIGTERM only record a stop, which the ingest loop
sees within half a second and answers by stopping the query: no KeyboardInterrupt cuts
a py4j call in half, so Ctrl-C prints no traceback. The time reported is the whole
command's, Spark's start included.
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

import redis

from app.lua import Scripts
from app.models.keys import Keys, keys_for
from app.models.layout import check_layout
from config import devstate, redact
from config import logging as busbar_logging
from config.errors import ConfigError
from config.settings import Settings
from spark import replay_args
from spark.connect import open_client
from spark.errors import SelectionError, SparkIngestError

if TYPE_CHECKING:
    from spark.keeper import Keeper

# The first line of an error we raise on purpose, or of Redis being unreachable, inside
# the Java exception text Spark builds from a Python worker's traceback.
OUR_ERRORS = re.compile(
    r"(?:DataLossError|OffsetAheadError|OptionError|NoJavaError|ConnectionError): ([^\n]+)"
)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="busbar spark", description="Spark jobs on busbar data")
    sub = root.add_subparsers(dest="job", required=True, metavar="JOB")
    ingest = sub.add_parser(
        "ingest", help="delivery log, attempt stream -> Parquet events, attempts, exactly once"
    )
    ingest.add_argument(
        "--output", required=True, help="lake directory; writes DIR/events and DIR/attempts"
    )
    ingest.add_argument("--checkpoint", required=True, help="Spark checkpoint directory")
    when = ingest.add_mutually_exclusive_group(required=True)
    when.add_argument("--available-now", action="store_true", help="ingest what exists, exit")
    when.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help="keep running, a micro-batch every SECONDS",
    )
    ingest.add_argument(
        "--table",
        action="append",
        choices=("events", "attempts"),
        help="only this table (again for another); default both, each with its own offsets",
    )
    ingest.add_argument("--master", help="Spark master URL (default local[*] / spark-submit's)")
    ingest.add_argument("--redis-url", help="default BUSBAR_REDIS_URL")
    ingest.add_argument("--key-prefix", help="default BUSBAR_KEY_PREFIX")
    ingest.add_argument(
        "--partitions", type=int, help="delivery log streams (one per shard): BUSBAR_SHARDS"
    )
    ingest.add_argument("--fail-on-data-loss", action="store_true", help="trimmed entries fail")
    ingest.add_argument(
        "--max-batches-per-trigger", type=int, metavar="N", help="cap on log entries per batch"
    )
    upkeep(ingest)
    migrate = sub.add_parser("migrate", help="a Parquet lake (_spark_metadata) -> Delta, in place")
    migrate.add_argument("--output", required=True, help="the lake directory (ingest's --output)")
    migrate.add_argument("--checkpoint", help="the ingest's --checkpoint (default DIR/_checkpoint)")
    erase = sub.add_parser("erase", help="carry out the erasures due in a lake, once")
    erase.add_argument("--output", required=True, help="the lake directory (ingest's --output)")
    erase.add_argument("--redis-url", help="default BUSBAR_REDIS_URL")
    erase.add_argument("--key-prefix", help="default BUSBAR_KEY_PREFIX")
    upkeep(erase)
    replay_args.add_parser(sub)
    return root


def upkeep(command: argparse.ArgumentParser) -> None:
    """The lake erasure's vacuum options (spark/keeper.py)."""
    command.add_argument("--erase-now", "--now", dest="erase_now", action="store_true",
                         help="vacuum an erasure's dropped files at once (readers of the "
                         "version before may fail)")  # fmt: skip
    command.add_argument("--vacuum-hours", type=int, default=1, metavar="H",
                         help="else vacuum dropped files once H hours old (default 1)")  # fmt: skip


def explain(exc: BaseException) -> str:
    """Our own message out of a Spark error that wraps a Python worker's traceback."""
    if isinstance(exc, SparkIngestError):
        return exc.message
    found = OUR_ERRORS.search(str(exc))
    return found.group(1) if found else str(exc).strip().splitlines()[0]


class RedisUnreachable(SparkIngestError):
    """The delivery log's Redis does not answer: nothing to start Spark for."""


def check_redis(url: str, cluster: bool = False, keys: Keys | None = None) -> None:
    """Redis answers, and (given the bus's keys) holds a layout this release reads: a
    newer one is refused before Spark starts (app/models/layout.py; ConfigError)."""
    try:
        with open_client(url, cluster, timeout=3) as client:
            client.ping()
            if keys is not None:
                check_layout(client, keys, Scripts(client))
    except redis.RedisError as exc:
        raise RedisUnreachable(
            f"Redis at {redact.url(url)} does not answer ({exc}); start busbar dev "
            "(`make run`) in this directory, or set BUSBAR_REDIS_URL or --redis-url"
        ) from None


class StopRequest:
    """Counts SIGINT/SIGTERM for the ingest loop to act on (see the module docstring):
    the first stops after the micro-batch in progress, a second one at once."""

    def __init__(self) -> None:
        self.count = 0
        self.arm()

    def arm(self) -> None:
        """Again after Spark's start: the SparkContext puts in a SIGINT handler of its
        own, which raises KeyboardInterrupt in the middle of whatever py4j call runs."""
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._record)

    def _record(self, _signum: int, _frame: FrameType | None) -> None:
        self.count += 1  # nothing else: printing here can hit a reentrant write and raise

    @property
    def requested(self) -> bool:
        return self.count > 0

    @property
    def urgent(self) -> bool:
        return self.count > 1


def say(line: str) -> None:
    print(f"busbar spark ingest: {line}", flush=True)


def run_job(args: argparse.Namespace, settings: Settings) -> int:
    if args.job == "ingest":
        return run_ingest(args, settings)
    if args.job == "migrate":
        return run_migrate(args)
    if args.job == "erase":
        return run_erase(args, settings)
    check_redis(
        args.redis_url or settings.effective_redis_url, settings.redis_cluster, keys_for(settings)
    )
    from spark.replay import run_replay  # pyspark imports take a second: only when needed

    return run_replay(args, settings, StopRequest())


def run_migrate(args: argparse.Namespace) -> int:
    from spark.migrate import migrate

    checkpoint = args.checkpoint or f"{str(args.output).rstrip('/')}/_checkpoint"
    for table, done in migrate(args.output, checkpoint).items():
        print(f"busbar spark migrate: {args.output}/{table}: {done}")
    return 0


def keeper_of(args: argparse.Namespace, settings: Settings, say: Callable[[str], None]) -> Keeper:
    from spark.keeper import Keeper

    redis_url = args.redis_url or settings.effective_redis_url
    prefix = settings.key_prefix if args.key_prefix is None else args.key_prefix
    client = open_client(redis_url, settings.redis_cluster, timeout=30)
    return Keeper(client, Keys(prefix, settings.shards), str(args.output), args.erase_now,
                  args.vacuum_hours, say, retention_s=settings.payload_retention_s)  # fmt: skip


def run_erase(args: argparse.Namespace, settings: Settings) -> int:
    """The erasures due, once, for a lake no ingest runs on (its registration too)."""
    check_redis(args.redis_url or settings.effective_redis_url, settings.redis_cluster)

    def said(line: str) -> None:
        print(f"busbar spark erase: {line}", flush=True)

    keeper = keeper_of(args, settings, said)
    keeper.register()
    done = keeper.erase_due()
    if not args.erase_now:
        from spark import lake_erase

        lake_erase.vacuum(args.output, args.vacuum_hours)
    said(f"{done} erasures carried out in {args.output}")
    return 0


def run_ingest(args: argparse.Namespace, settings: Settings) -> int:
    started = time.monotonic()
    redis_url = args.redis_url or settings.effective_redis_url
    prefix = settings.key_prefix if args.key_prefix is None else args.key_prefix
    check_redis(redis_url, settings.redis_cluster, Keys(prefix, settings.shards))
    from spark.ingest import ALL, check_layout, ingest  # pyspark imports: only when needed
    from spark.restarts import restarted

    check_layout(args.output, args.checkpoint)
    stop = StopRequest()  # a Ctrl-C while Spark starts is seen once it has started
    from spark.session import get_session

    spark = get_session(args.master, "busbar-ingest", {"spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")  # its WARNs are about Spark, not the ingest
    stop.arm()
    if stop.requested:
        return 0
    result = restarted(lambda: ingest(
        args.output,
        args.checkpoint,
        redis_url=redis_url,
        key_prefix=prefix,
        partitions=args.partitions or settings.shards,
        cluster=settings.redis_cluster,
        available_now=args.available_now,
        interval_seconds=args.interval,
        master=args.master,
        fail_on_data_loss=args.fail_on_data_loss,
        max_batches_per_trigger=args.max_batches_per_trigger,
        spark=spark,
        on_progress=say,
        stop=stop,
        tables=args.table or ALL,
        keeper=keeper_of(args, settings, say),
    ), say)  # fmt: skip
    stopped = " (stopped)" if stop.requested else ""
    done = ", ".join(
        f"{t.rows} {t.table} in {t.batches} micro-batches into {t.path}"
        for t in result.tables.values()
    )
    took = time.monotonic() - started
    print(f"busbar spark ingest: {done} ({took:.1f} s, Spark's start included){stopped}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = Settings.from_env(dev_var=devstate.VAR)
    except ConfigError as exc:
        print(f"busbar spark: {exc.message}", file=sys.stderr)
        return 2
    busbar_logging.setup(settings, "spark")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # one INFO line per gateway call
    try:
        return run_job(args, settings)
    except (RedisUnreachable, SelectionError) as exc:
        print(f"busbar spark {args.job}: {exc.message}", file=sys.stderr)
        return 2
    except Exception as exc:  # Spark wraps worker errors in its own types: show ours
        if not (isinstance(exc, SparkIngestError) or OUR_ERRORS.search(str(exc))):
            raise
        print(f"busbar spark {args.job}: {explain(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
