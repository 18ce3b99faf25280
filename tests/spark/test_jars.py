"""The connector jar cache: what it keeps, what it leaves to PySpark, and that reuse is offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark

from streamproc.spark.jars import _artifact, fetch_jars, installed_jars, jar_dir

REPO = Path(__file__).resolve().parents[2]


def test_artifact_names_drop_the_version() -> None:
    assert _artifact("kafka-clients-3.9.2.jar") == "kafka-clients"
    assert _artifact("spark-sql-kafka-0-10_2.13-4.2.0.jar") == "spark-sql-kafka-0-10_2.13"
    assert _artifact("scala-library-2.13.15.jar") == "scala-library"
    assert _artifact("zstd-jni-1.5.7-7.jar") == "zstd-jni"
    assert _artifact("spark-core_2.13-4.3.0-preview1.jar") == "spark-core_2.13"


def test_cache_holds_the_connector_and_nothing_pyspark_ships() -> None:
    jars = fetch_jars()
    names = [p.name for p in jars]
    assert any(n.startswith("spark-sql-kafka-0-10_2.13-") for n in names), names
    assert any(n.startswith("kafka-clients-") for n in names), names
    assert any(n.startswith("commons-pool2-") for n in names), names
    shipped = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    assert not ({_artifact(n) for n in names} & shipped)
    assert jar_dir().name == f"spark-kafka-{pyspark.__version__}"
    assert installed_jars() == jars


def test_fetch_script_reuses_a_complete_cache_without_maven(tmp_path: Path) -> None:
    fetch_jars()  # the cache is complete
    env = dict(os.environ, PATH=str(tmp_path))  # no mvn reachable: a second fetch must not need it
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "spark" / "fetch_jars.py")],
                          capture_output=True, text=True, env=env, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    printed = [Path(line) for line in proc.stdout.split()]
    assert printed == installed_jars()
