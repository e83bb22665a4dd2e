"""BUSBAR_REDIS_MIN_REPLICAS for the delivery engine's script calls on a cluster.

On one Redis the engine's pipe ends each write with WAIT (app/lua/pipe.py). On a
cluster a call goes through redis-py's cluster client, which picks a connection per
command, so a WAIT of its own would cover nothing. After each call, the node that ran
it gets a write to the fence key of the call's slot and WAIT behind it on one connection
(as the web does: app/models/replicas.py): a replica holding the fence holds the call's
writes too. Short of replicas, or when the node cannot be asked, the call's result
stands (it ran) and a warning is logged; the caller is told, and a delivery begun by
such a call is not sent (app/delivery/steps.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from redis.asyncio.cluster import ClusterNode, PipelineCommand, RedisCluster

log = logging.getLogger(__name__)


def fence_of(key: str | bytes) -> str:
    """The fence key in `key`'s slot: the same tag (`P{s:N}:`), then `fence`."""
    text = key.decode() if isinstance(key, bytes) else key
    return text[: text.index("}:") + 2] + "fence"


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

    async def after(self, key: str | bytes) -> bool:
        """Once `replicas` replicas hold what the call on `key`'s slot wrote: True; False
        (and a warning) when the timeout passed first or the node could not be asked."""
        fence = fence_of(key)
        commands = [
            PipelineCommand(0, "SET", fence, b""),
            PipelineCommand(1, "WAIT", self.replicas, self._timeout_ms),
        ]
        try:
            node: ClusterNode | None = self._client.get_node_from_key(fence)
            if node is None:
                raise LookupError(f"no node holds {fence}'s slot")
            await node.execute_pipeline(commands)
        except Exception as exc:  # the call ran; only its confirmation is unknown
            return self._short(fence, repr(exc))
        failed = [c.result for c in commands if isinstance(c.result, Exception)]
        acked: Any = commands[1].result
        if failed:
            return self._short(fence, repr(failed[0]))
        if int(acked) < self.replicas:
            return self._short(fence, f"{acked} did")
        return True

    def _short(self, fence: str, why: str) -> bool:
        log.warning(
            "a call on %s not confirmed by %d replica(s) in time (%s): it stands on the "
            "master, lost there if it dies before they copy it; a delivery it began is "
            "held back", fence.rsplit(":", 1)[0], self.replicas, why,
        )  # fmt: skip
        return False
