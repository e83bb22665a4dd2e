"""The attempt log's pages, read from a real Redis (app/models/attempts.py)."""

from __future__ import annotations

import redis

from app.models.attempts import AttemptLog, Query
from app.models.keys import Keys


def test_a_cursor_written_with_leading_zeros_is_the_id_it_names(
    redis_client: redis.Redis, keys: Keys
) -> None:
    """schemathesis asked for `before=000000000000000-0` (the first id there can be,
    zero-padded) and was answered 500: Redis refuses an exclusive range from 0-0. Such
    a cursor is the id it names: nothing before 0-0, the same page as `5-0` for
    `0005-00`."""
    key = keys.attempts("tok")
    for ms in (3, 5, 7):
        redis_client.xadd(key, {"x": "y"}, id=f"{ms}-0")
    log = AttemptLog(redis_client, keys)
    for first in ("000000000000000-0", "0-00", "00-0"):
        assert log.page("tok", Query(before=first)) == {"attempts": [], "next": None}
        assert log.page("tok", Query(before=first, until_ms=2)) == {"attempts": [], "next": None}
    assert _ids(log.page("tok", Query(before="0005-00"))) == ["3-0"]
    assert _ids(log.page("tok", Query(before="5-0"))) == ["3-0"]


def _ids(page: dict) -> list[str]:
    return [a["id"] for a in page["attempts"]]
