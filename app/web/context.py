"""What a request handler needs, built once per process and passed explicitly.

Flask's `current_app.extensions` carries it, so views reach Redis and settings without
module-level globals and tests can build an app on any Redis they like.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis
from flask import current_app

from app.lua import Scripts
from app.models.keys import Keys
from app.models.tokens import TokenStore
from config.settings import Settings

EXTENSION = "busbar"


@dataclass(frozen=True)
class Services:
    settings: Settings
    redis: redis.Redis
    keys: Keys
    scripts: Scripts
    tokens: TokenStore

    @classmethod
    def build(cls, settings: Settings, client: redis.Redis) -> Services:
        keys = Keys(settings.key_prefix)
        scripts = Scripts(client)
        return cls(
            settings=settings,
            redis=client,
            keys=keys,
            scripts=scripts,
            tokens=TokenStore(client, keys, scripts),
        )


def services() -> Services:
    return current_app.extensions[EXTENSION]
