"""The `busbar` command: a thin dispatcher to the `main` of each process.

Each process keeps its entry point next to its code (`app/web/main.py`,
`workers/main.py`, `dev/main.py`, `config/main.py`, `app/admin.py`,
`app/clients_admin.py`, `app/secrets_admin.py`, `app/migrate_admin.py`,
`app/erase_admin.py`, `spark/cli.py`)
and is imported only when asked for, so `busbar config` never loads Flask and `busbar
web` never loads pyspark. The two kinds of deliberate failure end the same way for
every command: a bad setting is one line and exit 2, any other BusbarError one line
and exit 1.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import cast

from app.errors import BusbarError
from app.release import version
from config.errors import ConfigError

COMMANDS = {  # name: (module with main(argv) -> int, help)
    "web": ("app.web.main", "serve the HTTP API with gunicorn on $PORT"),
    "worker": ("workers.main", "run delivery and maintenance jobs"),
    "dev": ("dev.main", "a Redis-compatible server, web and worker on this machine (./var/)"),
    "config": ("config.main", "check the environment and show every variable in effect"),
    "subscriber": ("app.admin", "pause or resume a subscriber: busbar subscriber pause NAME"),
    "clients": ("app.clients_admin", "names several clients share: busbar clients shared"),
    "secrets": ("app.secrets_admin", "seal secrets again under a new key: busbar secrets reseal"),
    "migrate": ("app.migrate_admin", "bring the store's Redis layout to this release's"),
    "erase": ("app.erase_admin", "erase one url's or key's events: busbar erase --url URL"),
    "spark": ("spark.cli", "Spark jobs on the delivery log (spark extra): busbar spark --help"),
}


def usage() -> str:
    lines = ["usage: busbar COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<10} {text}" for name, (_, text) in COMMANDS.items()]
    lines += ["", "`busbar COMMAND --help` for a command's options; `busbar --version`."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        print(f"busbar {version()}")
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"busbar: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    command = importlib.import_module(COMMANDS[name][0])
    # import_module's module is Any to mypy; every COMMANDS module has main(argv) -> int
    run = cast(Callable[[list[str]], int], command.main)
    try:
        return run(rest)
    except ConfigError as exc:
        print(f"busbar {name}: {exc.message}", file=sys.stderr)
        return 2
    except BusbarError as exc:
        print(f"busbar {name}: {exc.message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
