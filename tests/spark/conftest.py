"""Spark test fixtures: ONE SparkSession for the whole test session (start-up is slow).

The session runs ``local[2]`` with 8 shuffle partitions and the Kafka connector jars on
``spark.jars`` (fetched with ``mvn`` into ``$STREAMPROC_CACHE`` on first use). These tests never
skip: without PySpark or Java they fail, in CI and locally alike.

``STREAMPROC_SPARK_RECORDS`` sets the size of the generated inputs (default 100000).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


def spark_records(default: int = 100_000) -> int:
    return int(os.environ.get("STREAMPROC_SPARK_RECORDS", default))


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from streamproc.spark.session import spark_session

    session = spark_session("local[2]", app_name="streamproc-tests", kafka=True)
    try:
        yield session
    finally:
        session.stop()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/spark carries the ``spark`` marker."""
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.spark)
