"""`busbar dev`: Redis, web and worker on this machine, data under ./var/ (dev/supervisor.py)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from config import devstate
from config.startup import start
from dev.supervisor import Supervisor


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="busbar dev", description="Redis, web and worker on this machine"
    )
    parser.add_argument(
        "--cluster",
        type=int,
        metavar="N",
        help="a local Redis Cluster of N masters instead of one server (BUSBAR_DEV_CLUSTER)",
    )
    args = parser.parse_args(argv)
    # dev_var=None: this is the process that publishes var/dev.json, never a reader of it
    settings = start("dev", [], "Redis, web and worker on this machine", dev_var=None)
    if args.cluster is not None:
        if not 1 <= args.cluster <= 16:
            parser.error("--cluster takes 1 to 16 masters")
        settings = replace(settings, dev_cluster=args.cluster)
    return Supervisor(settings, devstate.VAR).run()
