"""What a running `busbar dev` tells the other busbar commands started beside it.

`busbar dev` starts its Redis on a new free port each time, so a command run in another
terminal (`busbar spark ingest ...`, a second `busbar worker`) cannot guess the URL.
While it runs, dev holds an exclusive lock on `var/dev.lock` and keeps its Redis URL and
API address in `var/dev.json` (mode 0600: a URL may carry a password), with the settings
its web and worker run with, secrets masked, for `busbar config` (config/origins.py). A
command with no BUSBAR_REDIS_URL reads that file, but only while the lock is held: a
file left by a dev that has stopped is ignored, and nothing in production (no dev
running in its working directory) ever reads it. The lock also keeps a second `busbar
dev` from starting on the same data.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import IO, Any

VAR = Path("var")
LOCK = "dev.lock"
STATE = "dev.json"


def claim(var: Path) -> IO[str] | None:
    """The lock, held for as long as the returned file stays open; None when another
    `busbar dev` holds it."""
    var.mkdir(parents=True, exist_ok=True)
    handle = open(var / LOCK, "a+")  # noqa: SIM115 - held open on purpose
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def publish(var: Path, state: dict[str, Any]) -> None:
    """Write the state atomically (readers never see half a file), readable by us only."""
    tmp = var / f".{STATE}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(state, out)
    tmp.replace(var / STATE)


def withdraw(var: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (var / STATE).unlink()


def held(var: Path) -> bool:
    """Whether a `busbar dev` holds the lock right now."""
    try:
        handle = open(var / LOCK)  # noqa: SIM115
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


def running(var: Path = VAR) -> dict[str, Any] | None:
    """The state of the `busbar dev` running with this var/ directory, if one runs."""
    if not held(var):
        return None
    try:
        state = json.loads((var / STATE).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None
