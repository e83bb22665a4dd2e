"""What an operator needs about a subscriber beyond Routemaster's listing: its queue per
lane (with the creation time of each lane's oldest batch), dead letters, failed
attempts, attempts by outcome, backoff, circuit, and the events dropped unsent.
GET /subscriptions adds these fields.

Events per lane are counted from the batches themselves (subscriber_listing.lua walks
each lane list): the gauges only hold a subscriber's total, and a batch's length is the
only exact count of what it holds.
"""

from __future__ import annotations

from typing import Any

import redis

from app.models import partitions
from app.models.attempt_result import OUTCOMES
from app.models.keys import BATCH_HEADER, LANES, Keys
from app.models.pausing import paused
from app.models.subscriber_calls import LaneFigures
from app.models.subscribers import SubscriberInfo

# why events left unsent, as the subscriber hash counts them: past their ttl, shed by
# Autodrop, trimmed from a full dead-letter list, given nothing by their route's
# transform (also GET /metrics' reasons)
DROPPED = ("expired", "autodropped", "deadletters_trimmed", "transformed_out")
CREATED = BATCH_HEADER.index("created_at")  # a batch's creation time, in its header


def detailed(infos: list[SubscriberInfo]) -> list[dict[str, Any]]:
    """Each subscriber's listing entry with the operator fields added, from what
    SubscriberStore.describe read (subscriber_listing.lua)."""
    return [
        {
            **info.describe(),
            "lanes": [lane_entry(lane) for lane in info.lanes],
            "attempts": {o: int(info.fields.get(f"attempts.{o}", 0)) for o in OUTCOMES},
            "paused": paused(info.fields),
            "deadletters": info.deadletters,
            "in_flight": info.in_flight,
            "failures": int(info.fields.get("failures", 0)),
            "next_attempt_at": int(info.fields.get("next_attempt_at", 0)) or None,
            "circuit": circuit(info.fields),
            "dropped": {reason: int(info.fields.get(reason, 0)) for reason in DROPPED},
        }
        for info in infos
    ]


def lane_entry(lane: LaneFigures) -> dict[str, Any]:
    """A lane's figures; `estimated` only where its events were (a subscriber of more
    than WALKED batches: app/models/subscribers.py)."""
    entry = {"lane": lane.lane, "batches": lane.batches, "events": lane.events,
             "oldest": lane.oldest}  # fmt: skip
    return {**entry, "estimated": True} if lane.estimated else entry


def circuit(fields: dict[str, str]) -> dict[str, Any]:
    """The failure policy's state (docs/delivery.md): open once BUSBAR_CIRCUIT_FAILURES
    attempts failed in a row, probed at `next_probe_at`, closed by the first success."""
    opened = int(fields.get("circuit_at", 0)) or None
    return {
        "state": "open" if opened else "closed",
        "opened_at": opened,
        "next_probe_at": int(fields.get("next_attempt_at", 0)) or None if opened else None,
        "failures_in_a_row": int(fields.get("streak", 0)),
    }


def oldest_by_lane(client: redis.Redis, keys: Keys, tokens: list[str]) -> dict[str, dict[int, int]]:
    """Token -> lane -> when the lane's oldest queued batch was created (ms), for GET
    /metrics: two pipelined round trips, a lane list's head then its batch's header, for
    the subscribers given (those with something queued), not every batch as the listing
    reads. A lane whose head was delivered between the two trips is left out."""
    parts = [
        (token, pid)
        for token, pids in zip(tokens, partitions.pids_many(client, keys, tokens), strict=True)
        for pid in pids
    ]
    pipe = client.pipeline(transaction=False)
    for _, pid in parts:
        for lane in LANES:
            pipe.lindex(keys.lane(pid, lane), 0)
    heads = pipe.execute()
    found = [
        (token, lane, keys.batch(token, head.decode()))
        for i, (token, _) in enumerate(parts)
        for lane, head in zip(LANES, heads[i * len(LANES) : (i + 1) * len(LANES)], strict=True)
        if head is not None
    ]
    pipe = client.pipeline(transaction=False)
    for _, _, key in found:
        pipe.lindex(key, CREATED)
    oldest: dict[str, dict[int, int]] = {}
    for (token, lane, _), created in zip(found, pipe.execute(), strict=True):
        if created is not None:
            lanes = oldest.setdefault(token, {})
            lanes[lane] = min(lanes.get(lane, int(created)), int(created))
    return oldest
