"""`busbar worker` (also `python -m workers`): delivery threads, maintenance, scheduler."""

from __future__ import annotations

from config.startup import start
from workers.process import WorkerProcess


def main(argv: list[str]) -> int:
    settings = start("worker", argv, "run delivery and maintenance jobs")
    settings.signing_key  # noqa: B018 -- ConfigError now, not at the first delivery
    return WorkerProcess(settings).run()
