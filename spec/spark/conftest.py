"""One SparkSession (local[2]) per test process, for every test that asks for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark.session import get_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
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
