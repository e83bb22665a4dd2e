"""BUSBAR_REDIS_MIN_REPLICAS for the delivery engine's script calls on a cluster.

On one Redis the engine's pipe ends each write with WAIT (app/lua/pipe.py). On a
cluster redis-py's client picks a connection per command, so a WAIT sent through it
would cover nothing. So a call is sent with WAIT behind it on one connection to the node
of its first key's slot (call()): one round trip, and WAIT covers what the call wrote
on that connection. When it did not run there (NOSCRIPT, a slot moved, the cluster
between layouts) it goes the client's own way, which loads scripts and follows
redirects, and then the node that ran it gets a write to the fence key of the call's
slot and WAIT behind it (after(), as the web does: app/models/replicas.py): a replica
holding the fence holds the call's writes too. After a connection failed, calls go
the client's way until one succeeds there, since that way learns the layout anew.
Short of replicas, or when the node cannot be asked, the call's result stands (it
ran) and a warning is logged; the caller is told, and a delivery begun by such a call
is not sent (app/delivery/steps.py).

The one module that uses redis-py's cluster internals (PipelineCommand,
ClusterNode.execute_pipeline): spec/app/lua/test_replicated.py fails by name when an
upgrade of redis-py moves or changes them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import redis
from redis.asyncio.cluster import ClusterNode, PipelineCommand, RedisCluster
from redis.exceptions import (
    AskError,
    ClusterDownError,
    MasterDownError,
    MovedError,
    NoScriptError,
    RedisClusterException,
    TryAgainError,
)

from app.models.replicas import fence_of, fenced, held, wait

log = logging.getLogger(__name__)
# answers that say a call never ran on the node it was sent to
NOT_RUN = (NoScriptError, MovedError, AskError, TryAgainError, ClusterDownError, MasterDownError)


@dataclass(frozen=True)
class Unconfirmed:
    """A call's reply when the replicas asked for were not seen to hold its writes in
    time (app/lua/pipe.py answers with it; AsyncLuaScript.confirmed unwraps it)."""

    reply: Any


class ClusterWait:
    def __init__(self, client: RedisCluster, replicas: int, timeout_ms: int) -> None:
        self._client = client
        self.replicas = replicas
        self._timeout_ms = timeout_ms
        self._detour = False  # a connection failed: the client's way, till it works

    async def call(self, command: tuple[Any, ...], key: str | bytes) -> tuple[Any, bool] | None:
        """The call, then WAIT, on one connection to the node of `key`'s slot: its reply
        and whether `replicas` replicas hold what it wrote; None when it did not run
        there, for the caller to send it the client's way. A script's error is raised,
        as the client raises it; a lost connection too (whether the call ran is unknown:
        it is not sent again)."""
        fence = fence_of(key)  # in the call's slot
        try:
            node = None if self._detour else self._client.get_node_from_key(fence)
        except (redis.RedisError, RedisClusterException):  # the layout not learned yet
            return None
        if node is None:
            return None
        commands = [PipelineCommand(0, *command), self._wait()]
        try:
            await node.execute_pipeline(commands)
        except (redis.ConnectionError, redis.TimeoutError):
            self._detour = True
            raise
        except OSError as exc:  # as the client reports it: a lost connection
            self._detour = True
            raise redis.ConnectionError(f"connection to {node.name} lost ({exc!r})") from exc
        reply, acked = commands[0].result, commands[1].result
        if isinstance(reply, NOT_RUN):
            return None
        if isinstance(reply, Exception):
            raise reply
        return reply, self._held(fence, acked)

    def _wait(self) -> PipelineCommand:
        """WAIT, second in a pipeline, after the write it is to cover."""
        return PipelineCommand(1, *wait(self.replicas, self._timeout_ms))

    def _held(self, fence: str, acked: Any) -> bool:
        """Whether WAIT's answer says enough replicas hold what came before it; if not,
        the warning."""
        if held(acked, self.replicas):
            return True
        return self._short(fence, repr(acked) if isinstance(acked, Exception) else f"{acked} did")

    async def after(self, key: str | bytes) -> bool:
        """Once `replicas` replicas hold what the call on `key`'s slot wrote: True; False
        (and a warning) when the timeout passed first or the node could not be asked."""
        self._detour = False  # a call went the client's way: it knows the layout now
        fence = fence_of(key)
        commands = [PipelineCommand(0, *fenced(fence)), self._wait()]
        try:
            node: ClusterNode | None = self._client.get_node_from_key(fence)
            if node is None:
                raise LookupError(f"no node holds {fence}'s slot")
            await node.execute_pipeline(commands)
        except Exception as exc:  # the call ran; only its confirmation is unknown
            return self._short(fence, repr(exc))
        if isinstance(commands[0].result, Exception):  # the fence not written
            return self._short(fence, repr(commands[0].result))
        return self._held(fence, commands[1].result)

    def _short(self, fence: str, why: str) -> bool:
        log.warning(
            "a call on %s not confirmed by %d replica(s) in time (%s): it stands on the "
            "master, lost there if it dies before they copy it; a delivery it began is "
            "held back", fence.rsplit(":", 1)[0], self.replicas, why,
        )  # fmt: skip
        return False
