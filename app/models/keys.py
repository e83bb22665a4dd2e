"""Every Redis key busbar uses. This docstring is the data layout.

All keys start with BUSBAR_KEY_PREFIX (default `busbar:`), written `P` below. Keys that
belong to one subscriber carry the hash tag `{sub:<token>}` so that a later Redis
Cluster mode can shard by subscriber without a data migration. Timestamps are integers,
milliseconds since the Unix epoch. Values are bytes; structured values are msgpack
(see `app/codec.py`).

Tokens (issue 2)
----------------
`P tokens` (hash)
    API token -> the client's name. The root key is never stored: it comes from
    BUSBAR_ROOT_KEY. Written by POST /api_tokens (HSETNX, so a token is never silently
    re-assigned), removed by DELETE /api_tokens/:token together with that client's
    subscriber (script `token_delete.lua`).

Subscribers (issue 2 removes them with their token; issue 3 fills them)
-----------------------------------------------------------------------
`P subscribers` (set)
    Tokens of every client that has a subscription.
`P {sub:<token>}:subscriber` (hash)
    The subscription of client `<token>`: callback, uuid, timeout, max_events,
    max_attempts, health_points, last_attempted_at.

Workers (issue 2 heartbeats; issue 4 scrubs)
--------------------------------------------
`P workers` (hash)
    Worker identifier -> timestamp of its last heartbeat. A worker silent for
    BUSBAR_SCRUB_AFTER_MS is dead: ScrubQueues requeues its pending jobs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Keys:
    """Key templates under one prefix; pass an instance instead of formatting strings."""

    prefix: str = "busbar:"

    @property
    def tokens(self) -> str:
        return f"{self.prefix}tokens"

    @property
    def subscribers(self) -> str:
        return f"{self.prefix}subscribers"

    def subscriber(self, token: str) -> str:
        return f"{self.prefix}{{sub:{token}}}:subscriber"

    @property
    def workers(self) -> str:
        return f"{self.prefix}workers"
