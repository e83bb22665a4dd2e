"""Registry of the Lua scripts in this folder: every multi-key change is one of them.

Each `*.lua` file starts with a header naming its KEYS and ARGV; the registry refuses a
file without one, so a script's contract is always written next to its code. A header
line `-- USES a b` prepends `lib/a.lua` then `lib/b.lua`: Lua scripts cannot call each
other, and this keeps logic several scripts share (the job state machine, the batch
bookkeeping) in one place. Scripts are registered once per client with redis-py's
`register_script`, which runs EVALSHA and reloads the script transparently after a
Redis restart (NOSCRIPT): that reload is not a replay, the script never ran.
"""

from __future__ import annotations

from importlib import resources

import redis
from redis.commands.core import Script

from app.errors import BusbarError


def header(text: str) -> list[str]:
    """The leading comment block of a script: where its KEYS and ARGV are written."""
    lines = text.lstrip().splitlines()
    end = next((i for i, line in enumerate(lines) if not line.startswith("--")), len(lines))
    return lines[:end]


def _read(relative: str) -> str:
    path = resources.files(__package__).joinpath(relative)
    if not path.is_file():
        raise BusbarError(f"no Lua library {relative}")
    return path.read_text(encoding="utf-8")


def _sources() -> dict[str, str]:
    found: dict[str, str] = {}
    for entry in resources.files(__package__).iterdir():
        if entry.name.endswith(".lua"):
            text = entry.read_text(encoding="utf-8")
            head = header(text)
            if not any(line.startswith("-- KEYS") for line in head) or not any(
                line.startswith("-- ARGV") for line in head
            ):
                raise BusbarError(f"{entry.name} lacks its '-- KEYS' / '-- ARGV' header")
            libs = [n for line in head if line.startswith("-- USES ") for n in line.split()[2:]]
            prelude = "".join(_read(f"lib/{lib}.lua") + "\n" for lib in libs)
            found[entry.name.removesuffix(".lua")] = prelude + text
    return found


class Scripts:
    """The scripts, registered on one client; attribute access by file name."""

    def __init__(self, client: redis.Redis) -> None:
        self._scripts: dict[str, Script] = {
            name: client.register_script(text) for name, text in _sources().items()
        }

    def __getattr__(self, name: str) -> Script:
        try:
            return self._scripts[name]
        except KeyError:
            raise AttributeError(f"no Lua script named {name!r}") from None

    def names(self) -> list[str]:
        return sorted(self._scripts)
