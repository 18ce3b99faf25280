"""``streamproc reprocess --master spark://...`` on a real Spark standalone cluster (a master and
two one-core workers started from the installed pyspark on 127.0.0.1), compared with the same job
on ``local[2]`` (the test session) and with the TopologyTestDriver / Tasks run in plain Python.

The command runs in a subprocess (its own driver JVM, as a user runs it): once as
``streamproc reprocess --master spark://...``, once through ``spark-submit``. Its topology modules are
not installed and the executors do not share the driver's working directory: the job ships them
(a module written into a temporary directory the command runs from; the repository's
``topologies`` package for currency). The Parquet output is read back with pyarrow.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from streamproc.spark.job import compute
from streamproc.spark.ordering import event_time_order
from tests.support.spark import (
    Out,
    StandaloneCluster,
    decode_with_sink_serdes,
    drive,
    frame_updates,
    gen_currency_input,
    gen_sessions_input,
    run_reference,
    standalone_cluster,
    write_jsonl,
)
from topologies import currency, sessions

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
P = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    with standalone_cluster(tmp_path_factory.mktemp("spark-standalone")) as c:
        yield c


def _reprocess_on(cluster: StandaloneCluster, cwd: Path, args: list[str], submit: bool = False) -> str:
    """``streamproc reprocess ARGS --master <cluster>`` in a subprocess from ``cwd``, or with
    ``submit`` the same through ``spark-submit --master <cluster>`` and streamproc.spark.submit;
    its stdout."""
    import pyspark

    import streamproc.spark.submit

    conf = [x for k, v in cluster.conf.items() for x in ("--conf", f"{k}={v}")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env.pop("PYTHONPATH", None)  # nothing but the shipped module may make the topology importable
    if submit:
        spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
        cmd = [str(spark_submit), "--master", cluster.master_url, *conf, "--conf",
               f"spark.pyspark.python={sys.executable}", "--conf", f"spark.pyspark.driver.python={sys.executable}",
               streamproc.spark.submit.__file__, *args, "-q"]
    else:
        cmd = [sys.executable, "-m", "streamproc.cli", "reprocess", *args, "--master", cluster.master_url, *conf, "-q"]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def _read_parquet_updates(path: Path) -> list[Out]:
    """The update stream a run wrote (``--encoding binary``), read with pyarrow, in task order."""
    rows = pq.read_table(path).to_pylist()
    rows.sort(key=lambda r: (r["topic"], r["partition"], r["offset"]))
    return [Out(r["topic"], r["key"], r["value"], r["timestamp"]) for r in rows]


def test_sessions_module_shipped_to_the_cluster_equal_local_and_the_driver(spark, cluster, tmp_path: Path) -> None:
    # a topology module only the driver's directory holds: the job must ship it to the executors
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / "shipped_sessions.py").write_text((REPO / "topologies" / "sessions.py").read_text())
    recs = gen_sessions_input(5_000, partitions=P, step_ms=2_000)
    path = write_jsonl(tmp_path / "clicks.jsonl", recs)
    out = tmp_path / "out"
    printed = _reprocess_on(cluster, job_dir, ["shipped_sessions", "--input", f"clicks={path}", "--output",
                                               f"parquet:{out}", "--order", "event-time", "--updates",
                                               "--encoding", "binary", "--application-id", "sessions"])
    assert f"records in:       {len(recs)}" in printed
    on_cluster = _read_parquet_updates(out / "updates")

    comp = compute(spark, "topologies.sessions", [f"clicks={path}"], order="event-time",
                   application_id="sessions", quiet=True)
    try:
        local = frame_updates(comp.updates)
    finally:
        comp.unpersist()
    assert on_cluster == local
    expected: list[tuple] = []
    for p in range(P):
        outs, _ = drive(sessions.build(), event_time_order([r for r in recs if r.partition == p]), "sessions")
        expected.extend(outs)
    assert decode_with_sink_serdes(sessions.topology, on_cluster, "sessions") == expected
    assert len(expected) > 1_000, "sessions must close: timestamps span hours"


def test_currency_two_stages_submitted_to_the_cluster_equal_local_and_tasks_in_order(
        spark, cluster, tmp_path: Path) -> None:
    """Through spark-submit (streamproc.spark.submit as the application file): its master and
    settings hold; the repository's topologies package is shipped by the job."""
    recs = gen_currency_input(5_000, partitions=P, seed=7)
    rates = write_jsonl(tmp_path / "rates.jsonl", [r for r in recs if r.topic == "rates"])
    payments = write_jsonl(tmp_path / "payments.jsonl", [r for r in recs if r.topic == "payments"])
    out = tmp_path / "out"
    inputs = [f"rates={rates}", f"payments={payments}"]
    printed = _reprocess_on(cluster, REPO, ["topologies.currency", *[x for i in inputs for x in ("--input", i)],
                                            "--output", str(out), "--order", "offset", "--updates",
                                            "--encoding", "binary", "--application-id", "currency"], submit=True)
    assert f"records in:       {len(recs)}" in printed
    on_cluster = _read_parquet_updates(out / "updates")

    comp = compute(spark, "topologies.currency", inputs, order="offset", application_id="currency", quiet=True)
    try:
        local = frame_updates(comp.updates)
    finally:
        comp.unpersist()
    assert on_cluster == local
    ref, rejected = run_reference(currency.build(), recs, order="offset", application_id="currency",
                                  tables=["rates"])
    assert rejected == 0
    assert on_cluster == sorted(ref, key=lambda u: u.topic)
    assert len(on_cluster) > 4_000
