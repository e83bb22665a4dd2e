"""The number of shards a bus was set up with, and data of the layout before shards."""

from __future__ import annotations

import dataclasses

import pytest

from app.models.meta import check_shards
from config.errors import ConfigError


def test_the_first_process_records_the_shards_and_a_different_count_is_refused(redis_client, keys):
    check_shards(redis_client, keys)
    check_shards(redis_client, keys)  # the same count again: fine
    with pytest.raises(ConfigError) as raised:
        check_shards(redis_client, dataclasses.replace(keys, shards=keys.shards + 1))
    assert f"set BUSBAR_SHARDS={keys.shards}" in raised.value.message


def test_data_of_the_layout_before_shards_is_refused_with_what_to_do(redis_client, keys):
    redis_client.hset("busbar:tokens", "old-client", "Old")
    with pytest.raises(ConfigError) as raised:
        check_shards(redis_client, keys)
    assert "docs/cluster.md, Upgrading" in raised.value.message
