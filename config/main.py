"""`busbar config`: the settings of the bus this shell's commands would use, checked,
each with where it came from, secrets masked.

With BUSBAR_REDIS_URL unset and a `busbar dev` running in this directory, that bus is
dev's: its web and worker run with what dev gave them (http allowed, its own address as
BUSBAR_PUBLIC_URL, its root key), which this shell's environment does not hold, so the
values shown are the ones dev wrote down for them (config/origins.py, var/dev.json).
Otherwise they are this environment's and the defaults. Either way this environment is
checked first: a bad value is one line naming each bad variable and exit 2, before
anything is printed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from config import devstate, origins
from config.settings import Settings, is_set
from config.shown import shown
from config.startup import start


def line(name: str, value: str, doc: str, origin: str, default: str, note: str = "") -> str:
    """`NAME=value  # what it is (where the value came from; default ...)`."""
    where = origin if origin == origins.DEFAULT else f"{origin}; default {default or 'none'}"
    return f"{name}={value}  # {doc} ({where}{note})"


def lines(settings: Settings, environ: Mapping[str, str]) -> list[str]:
    """The values `settings` hold, read from `environ` (a running dev may have supplied
    the Redis URL: then its origin is `busbar dev`)."""
    where = origins.origins(
        settings, environ, environ, outer_label=origins.ENVIRONMENT, inner_label=origins.DEV
    )
    out = []
    for spec in fields(Settings):
        name, kind = spec.metadata["env"], spec.metadata["shown"]
        value = getattr(settings, spec.name)
        if spec.name == "redis_url" and value is None:
            value = settings.effective_redis_url
        default = shown(kind, spec.default)
        out.append(line(name, shown(kind, value), spec.metadata["doc"], where[name], default))
    return out


def dev_lines(
    state: Mapping[str, Any], record: origins.Record, settings: Settings, environ: Mapping[str, str]
) -> list[str]:
    """The values the running dev's web and worker read; where this environment sets
    one otherwise, the line says so: a command started here would read that instead."""
    out = [
        f"# the bus of the busbar dev running here (pid {state.get('pid')}, "
        f"{state.get('api')}): its web and worker's settings, as it wrote them in "
        f"{devstate.VAR / devstate.STATE}"
    ]
    for spec in fields(Settings):
        name, kind = spec.metadata["env"], spec.metadata["shown"]
        default = shown(kind, spec.default)
        entry = record.get(name, {"value": default, "from": origins.DEFAULT})
        note = ""
        if environ.get(name, "").strip():
            here = shown(kind, getattr(settings, spec.name))
            if here != entry["value"]:
                note = f"; this shell has {here}, which a command started here would use"
        out.append(line(name, entry["value"], spec.metadata["doc"], entry["from"], default, note))
    return out


def main(argv: list[str]) -> int:
    settings = start("config", argv, "check the environment and show every variable in effect")
    dev = None if is_set("BUSBAR_REDIS_URL") else devstate.running()
    record = origins.recorded(dev) if dev else None
    if dev and record:
        print("\n".join(dev_lines(dev, record, settings, os.environ)))
    else:
        print("\n".join(lines(settings, os.environ)))
    return 0
