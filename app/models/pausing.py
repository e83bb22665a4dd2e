"""Pausing a subscriber: its events keep queuing, nothing is sent until it resumes.

For an operator during a subscriber's incident (the subscriber's own client, or root by
client name): a delivery already in flight finishes, then nothing is sent; ttls still
apply; on resume, delivery goes on in order, lanes first as always. The state is in the
subscriber's hash (`paused_at`, `paused_by`), so every worker honours it and a restart
keeps it. One script moves it and the subscriber's job together (subscriber_pause.lua).

A subscriber whose circuit has stayed open BUSBAR_AUTO_PAUSE_S is paused by the bus
itself (Expire's run, jobs/maintenance.py), `paused_by` saying why: probing an endpoint
that has been down a day only costs, and an operator resumes it once it is mended. The
script checks the circuit again in the step that pauses, so a probe that just went
through is never paused. Looking reads every subscriber, so a run looks only once a
hundredth of BUSBAR_AUTO_PAUSE_S has passed since one last did, 5 minutes at most
(stale_due): a day's limit looked at every Expire run (10 s) cost a worker some 6 ms
of CPU a second for 10,000 subscribers, to be a few seconds closer to the day.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import redis

from app.errors import NotFound
from app.lua import Scripts
from app.models import subscriber_calls as calls
from app.models.keys import Keys
from app.redis_client import text

LOOK_SHARE = 100  # the circuits are looked at every this much of BUSBAR_AUTO_PAUSE_S
LOOK_EVERY_MOST_S = 300  # and at least this often


def paused(fields: dict[str, str]) -> dict[str, Any] | None:
    """A listing's `paused`: since when and by whom, or None while delivering."""
    at = fields.get("paused_at")
    return None if at is None else {"at": int(at), "by": fields.get("paused_by", "")}


class Pausing:
    def __init__(self, client: redis.Redis, keys: Keys, scripts: Scripts) -> None:
        self._client = client
        self._keys = keys
        self._scripts = scripts

    def pause(self, token: str, by: str, now: int) -> dict[str, Any] | None:
        return self._set(token, "pause", by, now)

    def resume(self, token: str, by: str, now: int) -> dict[str, Any] | None:
        return self._set(token, "resume", by, now)

    def stale_due(self, after_s: int) -> bool:
        """Whether this run looks for circuits open `after_s` (no other run of any
        worker has looked within a hundredth of it, LOOK_EVERY_MOST_S at most)."""
        every_ms = max(1, min(LOOK_EVERY_MOST_S * 1000, after_s * 1000 // LOOK_SHARE))
        return bool(self._client.set(self._keys.auto_pause_looked, b"1", nx=True, px=every_ms))

    def pause_stale(self, now: int, after_s: int) -> list[str]:
        """Pause every subscriber whose circuit opened `after_s` ago or more; their names."""
        tokens = [text(t) for t in self._client.hkeys(self._keys.subscribers)]
        pipe = self._client.pipeline(transaction=False)
        for token in tokens:
            pipe.hmget(self._keys.subscriber(token), "circuit_at", "paused_at", "name")
        cutoff, paused = now - after_s * 1000, []
        for token, (opened, already, name) in zip(tokens, pipe.execute(), strict=True):
            if opened is None or already is not None or int(opened) > cutoff:
                continue
            since = datetime.fromtimestamp(int(opened) / 1000, UTC).isoformat(timespec="seconds")
            why = f"busbar: its circuit has been open since {since}"
            if self._set(token, "pause", why, now, cutoff) is not None:
                paused.append(text(name or b"(deleted client)"))
        return paused

    def _set(
        self, token: str, how: str, by: str, now: int, cutoff: int | None = None
    ) -> dict[str, Any] | None:
        """The subscriber's `paused` after the change; NotFound without a subscription."""
        found = self._scripts.run(calls.pause(self._keys, token, now, how == "resume", by, cutoff))
        if found is None:
            raise NotFound("no subscription for this client")
        return paused({"paused_at": found.at, "paused_by": found.by} if found.at else {})
