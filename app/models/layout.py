"""The store's layout number, checked by every process before its first step, and the
migrations that move an older store to this release's (app/release.py: LAYOUT).

- A store records its layout in `P{c}:meta` (field `layout`), stamped by the first
  process of a release that numbers layouts: a new store gets that process's layout, a
  store written before (clients, topics or a shard count in it) the first, 1.
- A layout newer than this release's is refused: ConfigError, one line naming both
  numbers and what to do (exit 2). A process of this release would misread it.
- A layout older than this release's has its migrations run: at start by the process
  itself when every one pending is `automatic` (additive: the release before, still
  running beside it in a rolling upgrade, reads the store as before), else only by
  `busbar migrate` (app/migrate_admin.py), and a process refuses to start until then.

A migration is a list of bounded, idempotent steps (each one script or one command, as
Expire's are), repeated until a step says nothing is left; the recorded layout moves
only once the whole migration has run (layout_advance.lua, from the layout it began at
only). A process killed mid-way leaves the old number, and the next one to start runs
the migration again from its first step: idempotent steps make that safe.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis

from app.lua import Scripts
from app.lua.call import Call, as_int
from app.models.keys import Keys
from app.release import LAYOUT, version
from config.errors import ConfigError

MAX_STEPS = 1_000_000  # a migration that never says it is done is a bug: stop, say so


@dataclass(frozen=True)
class Migration:
    """From layout `to - 1` to `to`. `step` does a bounded part of the work and says
    whether anything is left; it must be idempotent (run again after a crash)."""

    to: int
    summary: str  # one line for `busbar migrate` and the logs
    automatic: bool  # safe beside a process of the release before (additive)
    step: Callable[[redis.Redis, Keys, Scripts], bool]  # True: done


def stamp(keys: Keys, layout: int = LAYOUT) -> Call[int]:
    return Call("layout_stamp", [keys.meta, keys.tokens, keys.topics], [layout], as_int)


def advance(keys: Keys, begun: int, to: int) -> Call[int]:
    return Call("layout_advance", [keys.meta], [begun, to], as_int)


class Migrations:
    """The migrations a release carries, in order (MIGRATIONS below is this one's); a
    test passes its own to try the runner."""

    def __init__(self, known: Sequence[Migration], layout: int = LAYOUT) -> None:
        self.layout = layout
        self._by_target = {m.to: m for m in known}

    def pending(self, found: int) -> list[Migration]:
        """The migrations from `found` to this release's layout, each one there."""
        wanted = range(found + 1, self.layout + 1)
        missing = [n for n in wanted if n not in self._by_target]
        if missing:  # a release that raised LAYOUT without its migration: not shippable
            raise ConfigError(f"no migration to layout {missing[0]} in busbar {version()}")
        return [self._by_target[n] for n in wanted]

    def run(
        self,
        client: redis.Redis,
        keys: Keys,
        scripts: Scripts,
        found: int,
        report: Callable[[str], None] = lambda _line: None,
    ) -> int:
        """Every pending migration, in order; the layout recorded at the end."""
        for migration in self.pending(found):
            report(f"layout {migration.to - 1} -> {migration.to}: {migration.summary}")
            for _ in range(MAX_STEPS):
                if migration.step(client, keys, scripts):
                    break
            else:
                raise ConfigError(f"the migration to layout {migration.to} did not finish")
            found = scripts.run(advance(keys, migration.to - 1, migration.to))
        return found


MIGRATIONS = Migrations(())  # none yet: layout 1 is every layout up to this release's


def newer(found: int, layout: int) -> str:
    return (
        f"Redis holds busbar layout {found}, newer than this busbar ({version()}) reads "
        f"and writes ({layout}): run a release that knows layout {found} (CHANGELOG.md "
        "says which), or point BUSBAR_REDIS_URL / BUSBAR_KEY_PREFIX at another bus"
    )


def check_layout(
    client: redis.Redis, keys: Keys, scripts: Scripts, migrations: Migrations = MIGRATIONS
) -> int:
    """What a process does before its first step (module docstring); the layout it
    then runs on."""
    found = scripts.run(stamp(keys, migrations.layout))
    if found > migrations.layout:
        raise ConfigError(newer(found, migrations.layout))
    if found < migrations.layout:
        pending = migrations.pending(found)
        if not all(m.automatic for m in pending):
            raise ConfigError(
                f"Redis holds busbar layout {found}, older than this busbar ({version()}) "
                f"reads and writes ({migrations.layout}): run `busbar migrate` (CHANGELOG.md, "
                "Upgrading, says when it is safe)"
            )
        found = migrations.run(client, keys, scripts, found)
    return found
