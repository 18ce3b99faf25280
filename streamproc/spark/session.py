"""Create the SparkSession reprocessing runs on.

Defaults suit a small machine: ``local[2]``, ``spark.sql.shuffle.partitions=8``, 2 GiB driver memory,
no web UI, the Kafka connector jars from :mod:`streamproc.spark.jars` on ``spark.jars`` (fetched on
first use). Any ``conf`` entry overrides a default; under ``spark-submit`` (``master=None``) so does
anything it was given, and on a non-local master ``spark.default.parallelism`` is left to Spark. ``master`` is any Spark master URL (``local[N]``,
``spark://HOST:PORT``, ``yarn``, ``k8s://...``), or None to take what ``spark-submit`` configured;
make the jars available the same way. For ``local`` masters and a standalone master on the loopback
interface (``spark://127.0.0.1:...`` / ``spark://localhost:...``) the driver binds to 127.0.0.1.

``log_file``: when given and this call starts the JVM, the JVM's log (log4j, WARN and above) and
everything it writes to stderr (JVM warnings, Spark's progress bar, local Python workers' stderr)
go to that file instead of the console; ``streamproc reprocess`` does this unless ``--verbose``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_CONF", "LOOPBACK_MASTERS", "spark_session", "timed_session"]

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


LOOPBACK_MASTERS = ("local", "spark://127.0.0.1:", "spark://localhost:")

_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
"""


def _log_to_file(settings: dict[str, str], log_file: str) -> None:
    """Point the driver JVM's log4j2 at ``log_file`` (next to it: the generated configuration)."""
    path = os.path.abspath(log_file)
    cfg = path + ".log4j2.properties"
    with open(cfg, "w") as f:
        f.write(_LOG4J2.format(path=path))
    opt = f"-Dlog4j2.configurationFile=file:{cfg}"
    current = settings.get("spark.driver.extraJavaOptions")
    settings["spark.driver.extraJavaOptions"] = f"{current} {opt}" if current else opt


def spark_session(master: str | None = "local[2]", *, app_name: str = "streamproc-reprocess",
                  kafka: bool = True, conf: Mapping[str, str] | None = None,
                  log_level: str = "WARN", log_file: str | None = None) -> Any:
    """Return a SparkSession (``getOrCreate``: an already running session is reused as it is).

    ``kafka=True`` puts the Kafka connector jars on ``spark.jars`` (downloading them with ``mvn``
    the first time). The worker Python is this interpreter (``PYSPARK_PYTHON`` unless set).
    ``log_file``: see the module docstring (no effect when a session is already running).
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    settings = dict(DEFAULT_CONF)
    if master is None and os.environ.get("PYSPARK_GATEWAY_PORT"):
        # under spark-submit: what it was given wins over our defaults (the ``conf`` argument still wins)
        from pyspark import SparkConf

        submitted = {k for k, _ in SparkConf().getAll()}
        settings = {k: v for k, v in settings.items() if k not in submitted}
    if master and not master.startswith("local"):
        settings.pop("spark.default.parallelism")  # on a cluster: Spark's default, the executors' total cores
    if master and master.startswith(LOOPBACK_MASTERS):
        # local mode or a standalone master on this machine: keep every socket on the loopback interface
        settings.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if kafka:
        from .jars import fetch_jars

        settings["spark.jars"] = ",".join(str(p) for p in fetch_jars())
    starts_jvm = (SparkContext._active_spark_context is None and SparkContext._gateway is None
                  and not os.environ.get("PYSPARK_GATEWAY_PORT"))  # under spark-submit its JVM runs already
    if log_file and starts_jvm:
        _log_to_file(settings, log_file)
    settings.update(conf or {})
    for k, v in settings.items():
        builder = builder.config(k, v)
    if log_file and starts_jvm:
        spark = _with_stderr_to(log_file, builder.getOrCreate)
    else:
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark


def _with_stderr_to(log_file: str, start: Any) -> Any:
    """Call ``start()`` with file descriptor 2 pointing at ``log_file`` (appending), so the JVM it
    launches inherits that stderr for its whole life; this process's stderr is restored after."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 2)
        return start()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def timed_session(**kwargs: Any) -> tuple[Any, float]:
    """:func:`spark_session` and the seconds it took (JVM start-up included when it was not running)."""
    t0 = time.perf_counter()
    spark = spark_session(**kwargs)
    spark.range(1).count()  # first job: executors and Python workers warm
    return spark, time.perf_counter() - t0
