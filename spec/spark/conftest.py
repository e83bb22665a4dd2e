"""One SparkSession (local[2]) per test process, for every test that asks for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark.session import get_session


@pytest.fixture(scope="session")
def spark(spark_conf: str) -> Iterator[SparkSession]:
    del spark_conf  # its JVM maps the class archive
    session = get_session(
        "local[2]",
        app_name="busbar-tests",
        conf={
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# A JVM test interrupted by pytest-timeout's signal mid-call leaves the session's Py4J
# connection out of step, and every later test of that process fails with it. The
# suite-wide 120 s was reached under the full suite's load (four test processes and
# their JVMs on two cores): these get 600 s, as the Spark integration tests do.
SPARK_TIMEOUT_S = 600


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        uses_spark = "spark" in getattr(item, "fixturenames", ())
        if uses_spark and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SPARK_TIMEOUT_S))
