"""Registry of the Lua scripts in this folder: every multi-key change is one of them.

Each `*.lua` file starts with a header naming its KEYS and ARGV; the registry refuses a
file without one, so a script's contract is always written next to its code. A header
line `-- USES a b` prepends `lib/a.lua` then `lib/b.lua`: Lua scripts cannot call each
other, and this keeps logic several scripts share (the job state machine, the batch
bookkeeping) in one place. Each script is called with EVALSHA and loaded again after a
Redis restart (NOSCRIPT): that reload is not a replay, the script never ran.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import redis
from redis.exceptions import NoScriptError

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


@dataclass(frozen=True)
class LuaScript:
    """One script on one client: EVALSHA, and SCRIPT LOAD when the server lacks it.

    redis-py's own Script object does the same through its generic command layer
    (argument deprecation checks, a callable per call), which cost a delivering worker
    more CPU than the script itself; this calls the command directly."""

    client: redis.Redis
    text: str
    sha: str

    def __call__(
        self,
        keys: Sequence[Any] = (),
        args: Sequence[Any] = (),
        client: redis.Redis | None = None,
    ) -> Any:
        target = client or self.client
        try:
            return target.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            # after a restart or SCRIPT FLUSH: the script never ran, so this is no replay
            target.script_load(self.text)
            return target.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)


class Scripts:
    """The scripts, registered on one client; attribute access by file name."""

    def __init__(self, client: redis.Redis) -> None:
        self._scripts: dict[str, LuaScript] = {
            name: LuaScript(client, text, hashlib.sha1(text.encode()).hexdigest())
            for name, text in _sources().items()
        }

    def __getattr__(self, name: str) -> LuaScript:
        try:
            return self._scripts[name]
        except KeyError:
            raise AttributeError(f"no Lua script named {name!r}") from None

    def names(self) -> list[str]:
        return sorted(self._scripts)
