"""The erasure scripts (app/lua/erase_*.lua), their KEYS and ARGV and their replies,
each built in one place (app/services/erasure.py calls them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from app.lua.call import Call
from app.models.keys import Keys, Place


@dataclass(frozen=True)
class Match:
    """What an erasure matches: by url or ordering key, on some topics (empty: all),
    published (its `t`) before a time."""

    by: str  # "url" or "key"
    value: str
    topics: tuple[str, ...]
    before: int

    def args(self) -> list[object]:
        return [self.by, self.value, self.before, "\n".join(self.topics)]


class Step(NamedTuple):
    removed: int
    done: bool
    held: int = 0  # batches in flight that hold the entity (queued step only)


def _step(reply: Any) -> Step:
    values = [int(v) for v in reply]
    return Step(values[0], bool(values[1]), values[2] if len(values) > 2 else 0)


def queued(keys: Keys, erasure: str, token: str, pid: str, match: Match, budget: int) -> Call[Step]:
    home = keys.home(token)
    return Call(
        "erase_queued",
        [keys.subscriber(token), home.event_gauge, home.batch_gauge, home.counters,
         home.erasure(erasure), home.erasure_batches(erasure)],
        [home.base, pid, *match.args(), budget],
        _step,
    )  # fmt: skip


def deadletters(keys: Keys, erasure: str, token: str, match: Match, budget: int) -> Call[Step]:
    home = keys.home(token)
    return Call(
        "erase_deadletters",
        [keys.deadletters(token), home.erasure(erasure)],
        [token, *match.args(), budget],
        _step,
    )


def deliveries(shard: Place, erasure: str, match: Match, budget: int) -> Call[Step]:
    return Call(
        "erase_deliveries",
        [shard.delivery_log, shard.delivery_log_erased, shard.erasure(erasure),
         shard.erasure_batches(erasure)],
        [*match.args(), budget],
        _step,
    )  # fmt: skip


def shard_attempts(shard: Place, erasure: str, match: Match, budget: int) -> Call[Step]:
    """The shard's attempt stream, which the lake's attempts table is written from."""
    return Call(
        "erase_attempts",
        [shard.attempt_stream, shard.attempt_stream_erased, shard.erasure(erasure),
         shard.erasure_batches(erasure)],
        [match.value, "attempts", "attempts.entries", "", budget],
        _step,
    )  # fmt: skip


def attempt_log(
    keys: Keys, erasure: str, token: str, name: str, match: Match, budget: int
) -> Call[Step]:
    """One subscriber's attempt log (GET /subscriber/attempts); `name`: its client's."""
    home = keys.home(token)
    record = home.erasure(erasure)
    return Call(
        "erase_attempts",
        [keys.attempts(token), record, record, home.erasure_batches(erasure)],
        [match.value, f"log:{token}", "attempt_log.entries", name, budget],
        _step,
    )
