"""What every operator command that works on the store directly (`busbar subscriber`,
`clients`, `secrets`, `migrate`, `erase`) opens first: the settings as every command
reads them (the environment, then a `busbar dev` running here), its logging, and a
client of the bus's Redis with the bus's keys and scripts, closed when it is done."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis

from app.lua import Scripts
from app.models.keys import Keys, keys_for
from app.redis_client import connect
from config import devstate
from config import logging as busbar_logging
from config.settings import Settings


@dataclass(frozen=True)
class Session:
    settings: Settings
    client: redis.Redis
    keys: Keys
    scripts: Scripts


@contextmanager
def operator_session(command: str) -> Iterator[Session]:
    """`command` names the process in its log lines (`busbar <command>`)."""
    settings = Settings.from_env(dev_var=devstate.VAR)
    busbar_logging.setup(settings, command)
    client = connect(settings)
    try:
        yield Session(settings, client, keys_for(settings), Scripts(client))
    finally:
        client.close()
