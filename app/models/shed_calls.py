"""The scripts that free memory, their KEYS and ARGV and their replies: expire (expired
events), batch_drop (a lane's oldest batches, across subscribers) and subscriber_shed
(autodrop's fair share), each built in one place (app/services/shedding.py and
fair_share.py call them). spec/app/models/test_script_calls.py checks them."""

from __future__ import annotations

from typing import Any, NamedTuple

from app.lua.call import Call
from app.models.keys import Keys, Place


class Expired(NamedTuple):
    removed: int
    lane: int | None  # where to go on; None when done
    position: int  # in that lane's list


def _expired(reply: Any) -> Expired:
    removed, lane, position = (int(v) for v in reply)
    return Expired(removed, None if lane < 0 else lane, position)


def expire(
    keys: Keys, token: str, pid: str, now: int, entire: bool, budget: int, lane: int, at: int
) -> Call[Expired]:
    """One step of expiring the partition `pid` of a subscriber, from `lane` and
    position `at` (0, 0 to begin), reading at most `budget` events."""
    home = keys.home(token)
    return Call(
        "expire",
        [keys.subscriber(token), home.event_gauge, home.batch_gauge, home.counters],
        [home.base, pid, now, "1" if entire else "0", budget, lane, at],
        _expired,
    )


class Dropped(NamedTuple):
    batches: int
    events: int


def _dropped(reply: Any) -> Dropped:
    return Dropped(int(reply[0]), int(reply[1]))


def batch_drop(shard: Place, lane: int, most: int) -> Call[Dropped]:
    return Call(
        "batch_drop",
        [shard.event_gauge, shard.batch_gauge, shard.counters, shard.batch_index(lane)],
        [shard.base, lane, most],
        _dropped,
    )


class Shed(NamedTuple):
    batches: int
    events: int
    left: int  # events still queued


def _shed(reply: Any) -> Shed:
    return Shed(*(int(v) for v in reply))


def subscriber_shed(keys: Keys, shard: Place, token: str, keep: int, most: int) -> Call[Shed]:
    """Drop the subscriber's oldest batches while it has more than `keep` events queued,
    `most` batches at most in this call."""
    return Call(
        "subscriber_shed",
        [keys.subscriber(token), shard.event_gauge, shard.batch_gauge, shard.counters],
        [shard.base, token, keep, most],
        _shed,
    )
