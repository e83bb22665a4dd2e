"""The `busbar` command: web, worker, dev, config and spark.

It lives in `workers/` because it is the top of the import graph: it starts the web
server (app.web) and the worker (workers), never the other way round.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.errors import BusbarError, ConfigError
from config import logging as busbar_logging
from config.settings import Settings, variables


def _web(settings: Settings) -> int:
    if not settings.root_key:
        print(
            "busbar web: BUSBAR_ROOT_KEY is not set. Set it to a secret of 8+ printable "
            "characters (it is the root API key), or use `busbar dev`, which makes one.",
            file=sys.stderr,
        )
        return 2
    from app.web.server import serve

    serve(settings)
    return 0


def _worker(settings: Settings) -> int:
    from workers.process import WorkerProcess

    return WorkerProcess(settings).run()


def _dev(settings: Settings) -> int:
    from workers.dev import Supervisor

    return Supervisor(settings, Path("var")).run()


def _config(settings: Settings) -> int:
    for name, default, doc in variables():
        print(f"{name}={'' if default is None else default}  # {doc}")
    return 0


COMMANDS = {
    "web": (_web, "serve the HTTP API with gunicorn on $PORT"),
    "worker": (_worker, "run delivery and maintenance jobs"),
    "dev": (_dev, "embedded Redis + web + worker on this machine, data under ./var/"),
    "config": (_config, "check the configuration and list every variable with its default"),
}


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if args_list[:1] == ["spark"]:
        # Its own parser and its own imports: pyspark is an extra, loaded only here.
        from spark.cli import main as spark_main

        return spark_main(args_list[1:])
    parser = argparse.ArgumentParser(prog="busbar", description="an HTTP event bus")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text)
    sub.add_parser("spark", help="Spark jobs on the delivery log (spark extra): see --help")
    args = parser.parse_args(args_list)
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"busbar {args.command}: {exc.message}", file=sys.stderr)
        return 2
    busbar_logging.setup(settings, args.command)
    try:
        return COMMANDS[args.command][0](settings)
    except ConfigError as exc:  # settings that are valid alone but not together
        print(f"busbar {args.command}: {exc.message}", file=sys.stderr)
        return 2
    except BusbarError as exc:
        print(f"busbar {args.command}: {exc.message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
