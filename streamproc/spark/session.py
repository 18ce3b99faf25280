"""Create the SparkSession reprocessing runs on.

Defaults suit a small machine: ``local[2]``, ``spark.sql.shuffle.partitions=8``, 2 GiB driver memory,
no web UI, the Kafka connector jars from :mod:`streamproc.spark.jars` on ``spark.jars`` (fetched on
first use). Any ``conf`` entry overrides a default. On a cluster pass ``master`` (or leave it None
to take what ``spark-submit`` configured) and make the jars available the same way.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_CONF", "spark_session"]

DEFAULT_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "8",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "2g",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.python.worker.reuse": "true",
    "spark.sql.execution.pyspark.udf.faulthandler.enabled": "true",
}


def spark_session(master: str | None = "local[2]", *, app_name: str = "streamproc-reprocess",
                  kafka: bool = True, conf: Mapping[str, str] | None = None,
                  log_level: str = "WARN") -> Any:
    """Return a SparkSession (``getOrCreate``: an already running session is reused as it is).

    ``kafka=True`` puts the Kafka connector jars on ``spark.jars`` (downloading them with ``mvn``
    the first time). The worker Python is this interpreter (``PYSPARK_PYTHON`` unless set).
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    settings = dict(DEFAULT_CONF)
    if master and master.startswith("local"):
        # local mode: keep every socket on the loopback interface
        settings.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if kafka:
        from .jars import fetch_jars

        settings["spark.jars"] = ",".join(str(p) for p in fetch_jars())
    settings.update(conf or {})
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark


def timed_session(**kwargs: Any) -> tuple[Any, float]:
    """:func:`spark_session` and the seconds it took (JVM start-up included when it was not running)."""
    t0 = time.perf_counter()
    spark = spark_session(**kwargs)
    spark.range(1).count()  # first job: executors and Python workers warm
    return spark, time.perf_counter() - t0
