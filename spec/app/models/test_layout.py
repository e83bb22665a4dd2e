"""The store's layout number (app/models/layout.py) on a real server: stamped once, a
newer one refused, an older one migrated by bounded idempotent steps that a crash can
interrupt and a later start finishes, and only automatic migrations run at start.

The migrations here are the test's own (busbar's first layout has none): real steps on
real keys, passed to the runner as a release passes its own."""

from __future__ import annotations

import pytest
import redis

from app.lua import Scripts
from app.models.keys import Keys
from app.models.layout import Migration, Migrations, check_layout, stamp
from app.models.meta import check_store
from app.release import LAYOUT
from config.errors import ConfigError

BATCH = 10  # keys a step moves at most


def layout_of(client: redis.Redis, keys: Keys) -> int:
    return int(client.hget(keys.meta, "layout") or 0)


def test_a_new_store_gets_this_layout_and_an_older_one_the_first(
    redis_client: redis.Redis, keys: Keys, scripts: Scripts
):
    assert check_store(redis_client, keys) == LAYOUT
    assert layout_of(redis_client, keys) == LAYOUT
    redis_client.flushdb()
    redis_client.hset(keys.tokens, "old-client", "Old")  # written before layouts
    assert scripts.run(stamp(keys, 5)) == 1  # not 5: its data is of the first layout
    assert scripts.run(stamp(keys, 5)) == 1  # recorded once, never changed by a stamp


def test_a_newer_layout_is_refused_saying_both_numbers_and_what_to_do(
    redis_client: redis.Redis, keys: Keys
):
    redis_client.hset(keys.meta, "layout", LAYOUT + 1)
    with pytest.raises(ConfigError) as raised:
        check_store(redis_client, keys)
    message = raised.value.message
    assert f"busbar layout {LAYOUT + 1}, newer than this busbar" in message
    assert f"({LAYOUT})" in message and "CHANGELOG.md" in message
    assert layout_of(redis_client, keys) == LAYOUT + 1  # left as found


def moving(prefix: str, crash_after: list[int] | None = None) -> Migration:
    """Layout 1 -> 2 of a test: every `{prefix}old:*` string becomes a field of the
    hash `{prefix}new`, BATCH keys a step (HSET, then DEL: again after a crash, the
    HSET writes the same value). `crash_after`: raise once after that many steps."""
    done = [0]

    def step(client: redis.Redis, keys: Keys, scripts: Scripts) -> bool:
        names = sorted(client.scan_iter(f"{prefix}old:*", count=1000))[:BATCH]
        for name in names:
            client.hset(f"{prefix}new", name.decode().rsplit(":", 1)[1], client.get(name))
            client.delete(name)
        done[0] += 1
        if crash_after and done[0] == crash_after[0]:
            crash_after.clear()
            raise RuntimeError("killed mid-migration")
        return not names

    return Migration(2, "old strings into one hash", True, step)


def test_an_automatic_migration_runs_at_start_and_a_crash_is_finished_by_the_next(
    redis_client: redis.Redis, keys: Keys, scripts: Scripts
):
    prefix = keys.prefix
    redis_client.hset(keys.meta, "layout", 1)
    for i in range(35):
        redis_client.set(f"{prefix}old:{i}", f"v{i}")
    migrations = Migrations([moving(prefix, crash_after=[2])], layout=2)
    with pytest.raises(RuntimeError):
        check_layout(redis_client, keys, scripts, migrations)
    assert layout_of(redis_client, keys) == 1  # not moved: the migration did not finish
    assert redis_client.hlen(f"{prefix}new") == 20  # two steps of ten ran
    assert check_layout(redis_client, keys, scripts, migrations) == 2  # the next start
    assert layout_of(redis_client, keys) == 2
    assert redis_client.hgetall(f"{prefix}new") == {
        str(i).encode(): f"v{i}".encode() for i in range(35)
    }
    assert not list(redis_client.scan_iter(f"{prefix}old:*"))
    assert check_layout(redis_client, keys, scripts, migrations) == 2  # nothing left to do


def test_a_migration_that_is_not_automatic_waits_for_busbar_migrate(
    redis_client: redis.Redis, keys: Keys, scripts: Scripts
):
    redis_client.hset(keys.meta, "layout", 1)
    redis_client.set(f"{keys.prefix}old:a", "x")
    manual = Migration(2, "rewrite", False, moving(keys.prefix).step)
    migrations = Migrations([manual], layout=2)
    with pytest.raises(ConfigError, match=r"older than this busbar .* run `busbar migrate`"):
        check_layout(redis_client, keys, scripts, migrations)
    assert redis_client.get(f"{keys.prefix}old:a") == b"x"  # nothing ran
    assert migrations.run(redis_client, keys, scripts, 1) == 2  # what busbar migrate does
    assert redis_client.hget(f"{keys.prefix}new", "a") == b"x"


def test_the_layout_moves_only_from_where_a_migration_began(
    redis_client: redis.Redis, keys: Keys, scripts: Scripts
):
    """Two processes that both ran the migration 1 -> 2 move the record once; one that
    finished a migration from a layout the store has left never moves it back."""
    from app.models.layout import advance

    redis_client.hset(keys.meta, "layout", 1)
    assert scripts.run(advance(keys, 1, 2)) == 2
    assert scripts.run(advance(keys, 1, 2)) == 2
    redis_client.hset(keys.meta, "layout", 3)
    assert scripts.run(advance(keys, 1, 2)) == 3


def test_a_release_missing_a_migration_says_so(keys: Keys):
    with pytest.raises(ConfigError, match="no migration to layout 3"):
        Migrations([moving("x")], layout=3).pending(1)
