"""Shared fixtures: a real Redis-compatible server for the whole session.

The server is the same pip-installed binary `busbar dev` uses, started on a free port
(or BUSBAR_TEST_REDIS_URL when set), and flushed before each test that asks for it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from app.lua import Scripts
from app.models.keys import Keys, keys_for
from config.settings import Settings
from dev import redis_server

ROOT_KEY = "root-key-for-tests-0123456789"
# every JVM the tests start (in this process, and in the busbar commands it runs) reads
# its settings there: spec/spark/conf/spark-defaults.conf says which, and why
SPARK_CONF = str(Path(__file__).resolve().parent / "spark" / "conf")
os.environ.setdefault("SPARK_CONF_DIR", SPARK_CONF)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--server-only",
        action="store_true",
        help="only the tests that talk to a Redis-compatible server (make test's run on "
        "Redis 7: the others would run there as they ran on the embedded server)",
    )


# what a test that talks to a server asks for (each conftest's), or imports to start its own
SERVER_FIXTURES = frozenset({"single_redis_url", "redis_url", "layout", "local_cluster"})
SERVER_MODULES = frozenset({"dev.redis_server", "dev.cluster"})


def talks_to_a_server(item: pytest.Item) -> bool:
    """A test that asks for a server's fixture, or whose module holds dev.redis_server or
    dev.cluster (or a name from them) to start servers of its own; a test of fakeredis or
    of pure logic does not, whatever server the run is on."""
    if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    module = getattr(item, "module", None)
    names = vars(module).values() if module is not None else ()
    return any(
        getattr(v, "__name__", None) in SERVER_MODULES
        or getattr(v, "__module__", None) in SERVER_MODULES
        for v in names
    )


@pytest.hookimpl(tryfirst=True)  # before xdist names the groups in the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that starts a JVM (marked `jvm`, or asking for the Spark session) goes
    to one xdist group, so under `make test` (`--dist loadgroup`) they run one after
    another in one test process: never two JVMs at once on the machine, and one Spark
    session for all of spec/spark. Two side by side on two cores failed with "Python
    worker failed to connect back" (docs/tests.md). The group's tests that use the
    installed package (spec/integration/test_package.py) go last in it: its build is
    shared with the package's other tests, which run in other processes meanwhile, so
    the JVM tests' process does not spend its 80 s on it.

    The tests that start processes come first, the in-process ones after: xdist hands
    out the groups first (the most tests first), then the other tests in this order, so
    the short ones fill the end of the run, where the long ones, last in path order,
    left three test processes idle beside the last few (spec/integration last of all).

    With --server-only (make test's run on Redis 7), the tests that talk to no server
    are deselected: the same test on the same code, with nothing of the server's in it."""
    for item in items:
        if item.get_closest_marker("jvm") or "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("jvm"))
    items.sort(key=_scheduled)
    if config.getoption("server_only"):
        kept = {id(item) for item in items if talks_to_a_server(item)}
        config.hook.pytest_deselected(items=[i for i in items if id(i) not in kept])
        items[:] = [item for item in items if id(item) in kept]


def _scheduled(item: pytest.Item) -> tuple[bool, bool]:
    """(the JVM group's tests of the installed package, last; the in-process tests, after
    those that start processes)."""
    installed = item.get_closest_marker("jvm") is not None and "installed" in getattr(
        item, "fixturenames", ()
    )
    starts_processes = item.get_closest_marker("slow") is not None or (
        "integration" in item.path.parts
    )
    return installed, not starts_processes


@pytest.fixture(scope="session")
def spark_conf(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The SPARK_CONF_DIR of the JVMs started from here on: spec/spark/conf's settings
    with the class archive of spec/spark/class_archive.py (made once per test process
    that starts a JVM: about 20 s, and each JVM start after it about 5 s shorter). A
    SPARK_CONF_DIR of the machine's own is left as it is."""
    if os.environ["SPARK_CONF_DIR"] == SPARK_CONF and "PYSPARK_SUBMIT_ARGS" not in os.environ:
        from spec.spark.class_archive import environment

        os.environ.update(environment(tmp_path_factory.mktemp("jvm")))
    return os.environ["SPARK_CONF_DIR"]


@pytest.fixture(autouse=True)
def jvm_classes(request: pytest.FixtureRequest) -> None:
    """A test that starts a JVM does so with spark_conf's archive."""
    if request.node.get_closest_marker("jvm") or "spark" in request.fixturenames:
        request.getfixturevalue("spark_conf")


@pytest.fixture(scope="session")
def single_redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    given = os.environ.get("BUSBAR_TEST_REDIS_URL")
    if given:
        yield given
        return
    server = redis_server.start(tmp_path_factory.mktemp("redis"), persistent=False)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_url(single_redis_url: str) -> str:
    """One Redis; spec/integration runs its tests on a cluster too (its conftest)."""
    return single_redis_url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def settings(redis_url: str, redis_client: redis.Redis) -> Settings:
    return Settings(redis_url=redis_url, root_key=ROOT_KEY)


@pytest.fixture
def keys(settings: Settings) -> Keys:
    return keys_for(settings)


@pytest.fixture
def scripts(redis_client: redis.Redis) -> Scripts:
    return Scripts(redis_client)


@pytest.fixture
def project_root() -> Path:
    return Path(__file__).resolve().parent.parent
