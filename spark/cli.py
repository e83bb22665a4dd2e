"""`busbar spark ...` (also `python -m spark.cli ...`): Spark jobs over the delivery log.

    busbar spark ingest --output DIR --checkpoint DIR (--available-now | --interval S)
        [--master URL] [--redis-url URL] [--key-prefix P] [--partitions N]
        [--fail-on-data-loss] [--max-batches-per-trigger N]

Redis URL, key prefix and partition count default to busbar's own settings
(BUSBAR_REDIS_URL, BUSBAR_KEY_PREFIX, BUSBAR_DELIVERY_LOG_PARTITIONS), read by `config`
like every other setting, so the job reads the streams the workers write.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys

from config import logging as busbar_logging
from config.errors import ConfigError
from config.settings import Settings
from spark.errors import SparkIngestError

# The first line of an error we raise on purpose, or of Redis being unreachable, inside
# the Java exception text Spark builds from a Python worker's traceback.
OUR_ERRORS = re.compile(
    r"(?:DataLossError|OffsetAheadError|OptionError|NoJavaError|ConnectionError): ([^\n]+)"
)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="busbar spark", description="Spark jobs on busbar data")
    sub = root.add_subparsers(dest="job", required=True, metavar="JOB")
    ingest = sub.add_parser("ingest", help="delivery log -> Parquet events, exactly once")
    ingest.add_argument("--output", required=True, help="lake directory; writes DIR/events")
    ingest.add_argument("--checkpoint", required=True, help="Spark checkpoint directory")
    when = ingest.add_mutually_exclusive_group(required=True)
    when.add_argument("--available-now", action="store_true", help="ingest what exists, exit")
    when.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help="keep running, a micro-batch every SECONDS",
    )
    ingest.add_argument("--master", help="Spark master URL (default local[*] / spark-submit's)")
    ingest.add_argument("--redis-url", help="default BUSBAR_REDIS_URL")
    ingest.add_argument("--key-prefix", help="default BUSBAR_KEY_PREFIX")
    ingest.add_argument("--partitions", type=int, help="default BUSBAR_DELIVERY_LOG_PARTITIONS")
    ingest.add_argument("--fail-on-data-loss", action="store_true", help="trimmed entries fail")
    ingest.add_argument(
        "--max-batches-per-trigger", type=int, metavar="N", help="cap on log entries per batch"
    )
    return root


def explain(exc: BaseException) -> str:
    """Our own message out of a Spark error that wraps a Python worker's traceback."""
    if isinstance(exc, SparkIngestError):
        return exc.message
    found = OUR_ERRORS.search(str(exc))
    return found.group(1) if found else str(exc).strip().splitlines()[0]


def run_ingest(args: argparse.Namespace, settings: Settings) -> int:
    from spark.ingest import ingest  # pyspark imports take a second: only when needed

    result = ingest(
        args.output,
        args.checkpoint,
        redis_url=args.redis_url or settings.effective_redis_url,
        key_prefix=settings.key_prefix if args.key_prefix is None else args.key_prefix,
        partitions=args.partitions or settings.delivery_log_partitions,
        available_now=args.available_now,
        interval_seconds=args.interval,
        master=args.master,
        fail_on_data_loss=args.fail_on_data_loss,
        max_batches_per_trigger=args.max_batches_per_trigger,
    )
    print(
        f"busbar spark ingest: {result.rows} events in {result.batches} micro-batches "
        f"into {result.path} ({result.seconds:.1f} s)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"busbar spark: {exc.message}", file=sys.stderr)
        return 2
    busbar_logging.setup(settings, "spark")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # one INFO line per gateway call
    try:
        return run_ingest(args, settings)
    except Exception as exc:  # Spark wraps worker errors in its own types: show ours
        if not (isinstance(exc, SparkIngestError) or OUR_ERRORS.search(str(exc))):
            raise
        print(f"busbar spark {args.job}: {explain(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
