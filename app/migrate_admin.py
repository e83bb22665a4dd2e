"""`busbar migrate [--check]`: the store's layout against this release's, and the
migrations between them run (app/models/layout.py). Web and workers run the automatic
ones themselves at start; the others only from here, once the release before is
stopped (CHANGELOG.md, Upgrading, says for each release). Reads the settings as every
other command does (the environment, then a `busbar dev` running here).

Exit status: 0 when the store is at this release's layout (after migrating, without
--check); 1 with --check when migrations are pending; 2 when the store is newer than
this release, or a migration cannot run.
"""

from __future__ import annotations

import argparse

from app.models.layout import MIGRATIONS, newer, stamp
from app.operator_session import operator_session
from app.release import LAYOUT, version
from config.errors import ConfigError


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="busbar migrate",
        description="bring the store's Redis layout to this release's",
    )
    parser.add_argument(
        "--check", action="store_true", help="say what is pending and change nothing"
    )
    args = parser.parse_args(argv)
    with operator_session("migrate") as session:
        client, keys, scripts = session.client, session.keys, session.scripts
        found = scripts.run(stamp(keys))
        print(f"busbar {version()} reads and writes layout {LAYOUT}; the store holds {found}")
        if found > LAYOUT:
            raise ConfigError(newer(found, LAYOUT))
        pending = MIGRATIONS.pending(found)
        if not pending:
            print("nothing to migrate")
            return 0
        for migration in pending:
            when = "at start, by itself" if migration.automatic else "here only"
            print(f"pending: layout {migration.to}: {migration.summary} ({when})")
        if args.check:
            return 1
        found = MIGRATIONS.run(client, keys, scripts, found, report=print)
        print(f"the store holds layout {found}")
        return 0
