"""What a request handler needs, built once per process and passed explicitly.

Flask's `current_app.extensions` carries it, so views reach Redis and settings without
module-level globals and tests can build an app on any Redis they like.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import cast

from flask import current_app
from redis import Redis

from app.lua import Scripts
from app.models.deadletters import DeadLetters
from app.models.keys import Keys, keys_for
from app.models.pausing import Pausing
from app.models.replicas import Replicas
from app.models.sealed import Sealer
from app.models.subscribers import SubscriberStore
from app.models.tokens import TokenStore
from app.models.topics import TopicStore
from app.services.ingest import Ingest
from app.services.sealed_headers import sealer_of
from app.tracing import NO_TRACING, Tracing
from config.settings import Settings

EXTENSION = "busbar"


@dataclass(frozen=True)
class WebContext:
    settings: Settings
    redis: Redis
    keys: Keys
    scripts: Scripts
    tokens: TokenStore
    topics: TopicStore
    subscribers: SubscriberStore
    ingest: Ingest
    deadletters: DeadLetters
    pausing: Pausing
    replicas: Replicas  # BUSBAR_REDIS_MIN_REPLICAS: the barrier before an answer
    scaling_waits: threading.BoundedSemaphore  # GET /pulse/scaling's slow answers at once
    tracing: Tracing  # spans of publishes (app/tracing.py)
    sealer: Sealer  # subscribers' write-only secrets, sealed before Redis holds them

    @classmethod
    def build(cls, settings: Settings, client: Redis, tracing: Tracing = NO_TRACING) -> WebContext:
        keys = keys_for(settings)
        scripts = Scripts(client)
        return cls(
            settings=settings,
            redis=client,
            keys=keys,
            scripts=scripts,
            tokens=TokenStore(client, keys, scripts),
            topics=TopicStore(client, keys, scripts),
            subscribers=SubscriberStore(client, keys, scripts),
            ingest=Ingest(client, keys, scripts, settings),
            deadletters=DeadLetters(client, keys, scripts),
            pausing=Pausing(client, keys, scripts),
            replicas=Replicas(client, keys, settings),
            scaling_waits=threading.BoundedSemaphore(max(1, settings.web_threads // 2)),
            tracing=tracing,
            sealer=sealer_of(settings),
        )


def web_context() -> WebContext:
    # Flask's extensions dict holds Any; create_app stores the WebContext under EXTENSION
    return cast(WebContext, current_app.extensions[EXTENSION])
