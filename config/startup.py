"""How every busbar process starts: its options, its settings, its logging.

Unless BUSBAR_REDIS_URL says otherwise, a command started next to a running `busbar dev`
uses its Redis (config/devstate.py). A process that takes no options still parses them,
so `busbar worker --oops` is refused with usage instead of being ignored; a bad setting
raises ConfigError before anything runs (the `busbar` dispatcher turns it into one line
and exit 2).
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from config import devstate
from config import logging as busbar_logging
from config.settings import Settings

# variables earlier versions read, and what took their place
RETIRED = {
    "BUSBAR_WORKER_THREADS": "deliveries run as slots of one event loop; set "
    "BUSBAR_DELIVERY_CONCURRENCY (deliveries in flight per worker, default 5000)",
}


def start(
    process: str, argv: list[str], description: str, dev_var: Path | None = devstate.VAR
) -> Settings:
    """`dev_var`: where a running `busbar dev` may supply the Redis URL (None: never)."""
    argparse.ArgumentParser(prog=f"busbar {process}", description=description).parse_args(argv)
    settings = Settings.from_env(dev_var=dev_var)
    busbar_logging.setup(settings, process)
    for name, instead in RETIRED.items():
        if os.environ.get(name, "").strip():
            logging.getLogger(__name__).warning("%s is no longer read: %s", name, instead)
    return settings
