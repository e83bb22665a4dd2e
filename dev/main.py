"""`busbar dev`: Redis, web and worker on this machine, data under ./var/ (dev/supervisor.py)."""

from __future__ import annotations

from config import devstate
from config.startup import start
from dev.supervisor import Supervisor


def main(argv: list[str]) -> int:
    # dev_var=None: this is the process that publishes var/dev.json, never a reader of it
    settings = start("dev", argv, "Redis, web and worker on this machine", dev_var=None)
    return Supervisor(settings, devstate.VAR).run()
