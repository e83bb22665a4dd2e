"""The random-subscription tests' bus (spec/app/delivery/test_random_subscriptions.py and
test_random_destinations.py): one for each module, its engine and scheduler in threads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from spec.app.delivery.test_random_subscriptions import Rig, rig
from spec.integration.tls import InternalCA, make_internal_ca


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> InternalCA:
    return make_internal_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def bus(redis_url: str, ca: InternalCA) -> Iterator[Rig]:
    """One bus for the module's tests (its engine takes a second or two to stop), each
    example a client, topics and a receiver's path of its own."""
    client = redis.Redis.from_url(redis_url)
    client.flushdb()  # as the redis_client fixture does; nothing else runs meanwhile
    try:
        with rig(redis_url, client, ca) as found:
            yield found
    finally:
        client.close()
