"""Every integration test that asks for `redis_url` or `redis_client` runs twice: on one
Redis and on a local 3-master cluster, unless marked `single_node` (it restarts or
reconfigures the server itself) or `layout_free` (what it adds to the tests that run on
both layouts does not touch Redis: a Spark cluster, the lake's columns; its docstring
names the tests that run its Redis part on both). The cluster is started once per
session, on first use.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from dev import cluster as local
from spec.integration.layouts import Layout, cluster_layout, register


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "single_node: runs on one Redis only")
    config.addinivalue_line(
        "markers",
        "layout_free: runs on one Redis only; its Redis part runs on both layouts in the "
        "tests its docstring names",
    )
    config.addinivalue_line(
        "markers",
        "alone: asserts a latency or a stand-still time; make test runs these after the "
        "parallel part, one at a time, so other tests' load is not in the figure",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "layout" in metafunc.fixturenames:
        marks = ("single_node", "layout_free")
        single = any(metafunc.definition.get_closest_marker(m) is not None for m in marks)
        names = ["single"] if single else ["single", "cluster"]
        metafunc.parametrize("layout", names, indirect=True)


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local.LocalCluster]:
    with local.running(tmp_path_factory.mktemp("cluster"), 3, persistent=False) as started:
        yield started


@pytest.fixture
def layout(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Layout:
    if request.param == "cluster":
        found = cluster_layout(request.getfixturevalue("local_cluster").url)
    else:
        found = Layout("single", request.getfixturevalue("single_redis_url"))
    register(found)
    return found


@pytest.fixture
def redis_url(layout: Layout) -> str:
    """Flushed: with the suite spread over processes (make test), the test that ran before
    this one on the same server is any test, and its topics and subscribers would be
    this one's (a topic owned by another publisher, events arriving for a `sub`)."""
    client = layout.client()
    try:
        layout.flush(client)
    finally:
        client.close()
    return layout.url


@pytest.fixture
def redis_client(layout: Layout, redis_url: str) -> Iterator[redis.Redis]:
    """A client of the flushed server (redis_url flushed it)."""
    client = layout.client()
    yield client
    client.close()
