"""`busbar config`: the configuration in effect, checked, with secrets masked.

Every variable is read the way the other commands read it (the environment, then a
running `busbar dev` for the Redis URL), so what this prints is what `busbar web` or
`busbar worker` started from the same shell would use. A bad value is one line naming
each bad variable and exit 2, before anything is printed.
"""

from __future__ import annotations

import os
from dataclasses import fields
from typing import Any

from config import redact
from config.settings import Settings
from config.startup import start


def text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def shown(kind: str, value: Any) -> str:
    if kind == "secret":
        return redact.secret(value)
    if kind == "url" and value:
        return redact.url(value)
    return text(value)


def lines(settings: Settings, environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """`NAME=value  # what it is`, then where the value comes from when it is not the
    default: the environment, or the `busbar dev` running in this directory."""
    out = []
    for spec in fields(Settings):
        name, kind = spec.metadata["env"], spec.metadata["shown"]
        value = getattr(settings, spec.name)
        note = ""
        if environ.get(name, "").strip():
            note = f" (set; default {shown(kind, spec.default) or 'none'})"
        elif value != spec.default:
            note = " (from the busbar dev running here, var/dev.json)"
        elif spec.name == "redis_url":
            value, note = settings.effective_redis_url, " (default)"
        out.append(f"{name}={shown(kind, value)}  # {spec.metadata['doc']}{note}")
    return out


def main(argv: list[str]) -> int:
    settings = start("config", argv, "check the environment and show every variable in effect")
    print("\n".join(lines(settings, os.environ)))
    return 0
