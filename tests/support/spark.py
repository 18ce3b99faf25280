"""Generated inputs and independent reference runs for the Spark reprocessing tests.

Inputs are :class:`In` records with Kafka bytes, partitioned with Kafka's default partitioner
(murmur2 of the key), offsets counted per partition in generation order, timestamps mostly rising
with jitter so some records arrive late.

References (no Spark): :func:`run_reference` runs the topology with :class:`Task` objects directly,
one per (sub-topology, partition), in the documented replay order, including the repartition hop
(destination partition = murmur2 of the key; a repartition partition holds each producing
task's records in production order, the producers merged by smallest head timestamp, ties to the
lower producing partition: ``offset_order`` with the producing partition as the "topic"). :func:`final_table` reduces an update list
to the last value per (topic, key).
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from aiokafka.partitioner import murmur2


class In(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


class Out(NamedTuple):
    """An update: (topic, key bytes, value bytes, timestamp); compared as tuples."""

    topic: str
    key: bytes | None
    value: bytes | None
    timestamp: int


def kafka_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def assign_positions(rows: Iterable[tuple[str, bytes | None, bytes | None, int]], partitions: int) -> list[In]:
    """(topic, key, value, timestamp) -> In with partition (murmur2) and per-partition offsets."""
    nxt: dict[tuple[str, int], int] = {}
    out = []
    for topic, key, value, ts in rows:
        p = kafka_partition(key, partitions) if key is not None else 0
        o = nxt.get((topic, p), 0)
        nxt[(topic, p)] = o + 1
        out.append(In(topic, p, o, ts, key, value))
    return out


def gen_clicks(n: int, *, partitions: int = 4, users: int = 300, pages: int = 20, seed: int = 1,
               step: int = 3, jitter: int = 400, topic: str = "clicks") -> list[In]:
    """Clicks keyed by user (UTF-8), JSON values ``{"page": "/p<i>", "n": i}``; timestamps rise by
    ``step`` ms per record with up to ``jitter`` ms of disorder (so some records are late)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        user = f"user-{rng.randrange(users):04d}"
        ts = 1_700_000_000_000 + i * step - rng.randrange(jitter)
        value = json.dumps({"page": f"/p{rng.randrange(pages)}", "n": i}, separators=(",", ":"))
        rows.append((topic, user.encode(), value.encode(), ts))
    return assign_positions(rows, partitions)


def write_jsonl(path: Path, records: Sequence[In], encoding: str = "text", bad_lines: Sequence[str] = ()) -> Path:
    """Write records as JSON lines (key/value as UTF-8 text or base64); ``bad_lines`` appended raw."""
    path.parent.mkdir(parents=True, exist_ok=True)

    def enc(b: bytes | None) -> str | None:
        if b is None:
            return None
        return base64.b64encode(b).decode() if encoding == "base64" else b.decode("utf-8")

    with path.open("w") as f:
        for r in records:
            f.write(json.dumps({"key": enc(r.key), "value": enc(r.value), "timestamp": r.timestamp,
                                "partition": r.partition, "offset": r.offset}) + "\n")
        for line in bad_lines:
            f.write(line + "\n")
    return path


def write_parquet(spark: Any, path: Path, records: Sequence[In]) -> Path:
    """Write records as Parquet with binary key/value columns."""
    df = spark.createDataFrame(
        [(r.key, r.value, r.timestamp, r.partition, r.offset) for r in records],
        "key binary, value binary, timestamp long, partition int, offset long")
    df.repartition(3).write.parquet(str(path))
    return path


# --------------------------------------------------------------------------------------------
# The reference: Tasks run directly, in the documented order
# --------------------------------------------------------------------------------------------


class _Rec(NamedTuple):
    key: Any
    value: Any
    timestamp: int
    headers: tuple = ()
    offset: int = 0
    topic: str = ""
    partition: int = 0


def _order(records: list[In], order: str, tables: Sequence[str]) -> list[In]:
    from streamproc.spark.ordering import event_time_order, offset_order

    return offset_order(records) if order == "offset" else event_time_order(records, tables)


def run_reference(topology: Any, records: Sequence[In], *, order: str = "offset", application_id: str = "ref",
                  tables: Sequence[str] = (), batch: int = 1) -> tuple[list[Out], int]:
    """Updates of every non-repartition sink, per task in production order; and the rejected count.

    Each task partition's outputs are listed in production order; tasks in (stage, partition)
    order. Unreadable records (SerializationError) are skipped and counted. ``batch`` > 1 hands the
    task runs of up to that many consecutive records of one topic per ``Task.process`` call (as the
    daemon and the Spark job do); the result is the same.
    """
    from streamproc.engine.partitioning import partition_for, to_bytes
    from streamproc.engine.task import Task
    from streamproc.errors import ProcessingError, SerializationError
    from streamproc.spark.job import plan_stages, repartition_topics

    stages = plan_stages(topology, application_id)
    internal = repartition_topics(topology, application_id)
    counts: dict[str, int] = {}
    for r in records:
        counts[r.topic] = max(counts.get(r.topic, 0), r.partition + 1)
    pending: dict[str, list[tuple[int, int, int, In]]] = {}  # internal topic -> (ts, src part, seq, rec)
    updates: list[Out] = []
    rejected = 0
    for stage in stages:
        n = max(counts.get(t, 1) for t in stage.source_topics)
        for t in stage.internal_sinks:
            counts[t] = n
        mine = [r for r in records if r.topic in stage.source_topics]
        for t in stage.source_topics:
            if t in pending:
                from streamproc.spark.ordering import offset_order

                for dest in sorted({rec.partition for _, _, _, rec in pending[t]}):
                    items = [x for x in pending[t] if x[3].partition == dest]
                    merged = offset_order(items, topic=lambda x: f"{x[1]:010d}", offset=lambda x: x[2],
                                          timestamp=lambda x: x[0])
                    mine.extend(x[3]._replace(offset=o) for o, x in enumerate(merged))
        for p in sorted({r.partition for r in mine}):
            task = Task(topology, stage.subtopology_id, p, application_id, changelog=False)
            seq = 0
            ordered = _order([r for r in mine if r.partition == p], order, tables)
            i = 0
            while i < len(ordered):
                j = i + 1
                while j < len(ordered) and j - i < batch and ordered[j].topic == ordered[i].topic:
                    j += 1
                run = [_Rec(r.key, r.value, r.timestamp, (), r.offset, r.topic, p) for r in ordered[i:j]]
                start = 0
                while start < len(run):
                    try:
                        task.process(run[0].topic, p, run[start:] if start else run)
                        start = len(run)
                    except (SerializationError, ProcessingError):
                        rejected += 1
                        start += task.last_count
                    for o in task.drain_outputs():
                        k, v = to_bytes(o.key, "key"), to_bytes(o.value, "value")
                        if o.topic in stage.internal_sinks:
                            dest = partition_for(k, counts[o.topic])
                            pending.setdefault(o.topic, []).append(
                                (o.timestamp, p, seq, In(o.topic, dest, 0, o.timestamp, k, v)))
                        if o.topic not in internal:
                            updates.append(Out(o.topic, k, v, o.timestamp))
                        seq += 1
                i = j
            task.close()
    return updates, rejected


def final_table(updates: Iterable[Out]) -> dict[tuple[str, bytes], tuple[bytes, int]]:
    """Last (value, timestamp) per (topic, key) in list order; tombstones delete; null keys ignored."""
    table: dict[tuple[str, bytes], tuple[bytes, int]] = {}
    for u in updates:
        if u.key is None:
            continue
        if u.value is None:
            table.pop((u.topic, u.key), None)
        else:
            table[(u.topic, u.key)] = (u.value, u.timestamp)
    return table


def frame_updates(df: Any) -> list[Out]:
    """Spark update/table frame (topic, partition, offset, timestamp, key, value; binary) -> list of
    Out ordered by (topic, partition, offset)."""
    rows = df.select("topic", "partition", "offset", "timestamp", "key", "value").collect()
    rows.sort(key=lambda r: (r["topic"], r["partition"], r["offset"]))
    return [Out(r["topic"], None if r["key"] is None else bytes(r["key"]),
                None if r["value"] is None else bytes(r["value"]), r["timestamp"]) for r in rows]


def frame_table(df: Any) -> dict[tuple[str, bytes | None], tuple[bytes | None, int]]:
    return {(u.topic, u.key): (u.value, u.timestamp) for u in frame_updates(df)}


# --------------------------------------------------------------------------------------------
# Inputs of the example topologies
# --------------------------------------------------------------------------------------------


def gen_sessions_input(n: int, *, partitions: int = 4, seed: int = 11, step_ms: int = 100,
                       late_share: float = 0.03, max_late_ms: int = 3_600_000) -> list[In]:
    """``clicks`` for ``topologies.sessions`` (gap 30 min, grace 5 min): ~n/6 users so a user clicks
    about every 10 minutes on average, in bursts; ``late_share`` of the clicks carry a timestamp up
    to ``max_late_ms`` in the past (some beyond the grace: dropped in offset order)."""
    rng = random.Random(seed)
    users = max(1, n // 6)
    rows = []
    t = 1_700_000_000_000
    for i in range(n):
        t += rng.randrange(2 * step_ms)
        user = f"u{rng.randrange(users):06d}"
        ts = t - rng.randrange(max_late_ms) if rng.random() < late_share else t
        value = json.dumps({"page": f"/p{rng.randrange(50)}"}, separators=(",", ":"))
        rows.append(("clicks", user.encode(), value.encode(), ts))
    return assign_positions(rows, partitions)


CURRENCIES = ("USD", "GBP", "JPY", "CHF", "SEK", "NOK", "DKK", "PLN", "CZK", "HUF", "EUR", "AUD")


def gen_currency_input(n: int, *, partitions: int = 4, seed: int = 23, step_ms: int = 50,
                       rate_share: float = 0.03, late_share: float = 0.05,
                       max_late_ms: int = 20_000) -> list[In]:
    """``rates`` and ``payments`` for ``topologies.currency`` (history 1 h, grace 5 s).

    Rates: JSON numbers per currency, some arriving up to ``max_late_ms`` late, ~1% tombstones.
    Payments: keyed ``p<i>``, ``{"id", "amount", "currency"}``; ``late_share`` of them late.
    The timeline spans ``n * step_ms`` ms (more than the 1 h history for n = 100k).
    """
    rng = random.Random(seed)
    rows = []
    t = 1_700_000_000_000
    for i in range(n):
        t += rng.randrange(2 * step_ms)
        late = rng.randrange(max_late_ms) if rng.random() < late_share else 0
        if rng.random() < rate_share:
            cur = rng.choice(CURRENCIES)
            value = None if rng.random() < 0.01 else json.dumps(round(rng.uniform(0.001, 2.0), 4)).encode()
            rows.append(("rates", cur.encode(), value, t - late))
        else:
            pid = f"p{i:07d}"
            pay = {"id": pid, "amount": round(rng.uniform(1, 500), 2), "currency": rng.choice(CURRENCIES)}
            rows.append(("payments", pid.encode(), json.dumps(pay, separators=(",", ":")).encode(), t - late))
    return assign_positions(rows, partitions)


# --------------------------------------------------------------------------------------------
# The TopologyTestDriver as oracle
# --------------------------------------------------------------------------------------------


def decode_with_sink_serdes(topology: Any, updates: Iterable[Out], application_id: str) -> list[tuple]:
    """(topic, key, value, timestamp) with key/value decoded by the sink serdes (Python objects)."""
    out = []
    for u in updates:
        ks, vs = topology.sink_serdes(u.topic, application_id)
        key = ks.deserialize(u.key) if ks is not None else u.key
        value = vs.deserialize(u.value) if vs is not None else u.value
        out.append((u.topic, key, value, u.timestamp))
    return out


def drive(topology: Any, records: Sequence[In], application_id: str) -> tuple[list[tuple], int]:
    """Feed ``records`` (already in the wanted order) to a fresh TopologyTestDriver; return every
    output record as (topic, key, value, timestamp) in output order, and the dropped count.

    Keys/values are decoded with the source serdes first (the driver serialises them back)."""
    from streamproc.testing import TopologyTestDriver

    with TopologyTestDriver(topology, application_id=application_id, changelog=False) as d:
        inputs: dict[str, Any] = {}
        for r in records:
            topic = inputs.get(r.topic)
            if topic is None:
                topic = inputs[r.topic] = d.input_topic(r.topic)
            ks, vs = topology.source_serdes(r.topic, application_id)
            key = ks.deserialize(r.key) if ks is not None else r.key
            value = vs.deserialize(r.value) if vs is not None else r.value
            topic.pipe(key, value, r.timestamp)
        outs: list[tuple] = []
        # output records in production order across topics: the driver keeps offsets per topic, and
        # each example topology writes one output topic
        for name in d.output_topics():
            outs.extend((name, rec.key, rec.value, rec.timestamp) for rec in d.output_topic(name).read_records())
        dropped = int(d.metrics.get("dropped_records", 0))
    return outs, dropped


# --------------------------------------------------------------------------------------------
# A Spark standalone cluster on 127.0.0.1, from the installed pyspark's own jars and scripts
# --------------------------------------------------------------------------------------------


class StandaloneCluster(NamedTuple):
    """A running standalone cluster: ``master_url`` (``spark://127.0.0.1:PORT``) for ``--master``;
    ``conf``: the settings a job needs to fit it (executor cores/memory, total cores);
    ``pids``: master first, then the workers; ``work_dir``: logs and the workers' directories."""

    master_url: str
    web_url: str
    conf: dict[str, str]
    pids: list[int]
    work_dir: Path


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive_workers(web_url: str) -> int:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{web_url}/json/", timeout=2) as resp:
            return int(json.load(resp).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


_LOG4J2_DAEMON = """\
rootLogger.level = info
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""



@contextmanager
def standalone_cluster(work_dir: Path, *, workers: int = 2, cores: int = 1, memory_mib: int = 1024,
                       executor_memory_mib: int = 512, start_timeout_s: float = 90.0) -> Any:
    """Start a Spark standalone master and ``workers`` workers (``cores`` cores and ``memory_mib``
    each) with ``spark-class`` from the installed pyspark (``$SPARK_HOME`` = the pyspark package
    directory), every socket on 127.0.0.1, logs and worker directories under ``work_dir``; yield
    a :class:`StandaloneCluster` once the master sees every worker; on exit stop the processes by
    their own pids (SIGTERM, then SIGKILL after 20 s), workers first. Raises ``RuntimeError`` with
    the daemon's log tail when the cluster does not come up in ``start_timeout_s``."""
    import os
    import signal
    import subprocess
    import time

    import pyspark

    spark_home = Path(pyspark.__file__).resolve().parent
    spark_class = spark_home / "bin" / "spark-class"
    work_dir.mkdir(parents=True, exist_ok=True)
    log4j = work_dir / "log4j2.properties"
    log4j.write_text(_LOG4J2_DAEMON)
    env = dict(os.environ, SPARK_HOME=str(spark_home), SPARK_LOCAL_IP="127.0.0.1", SPARK_MASTER_HOST="127.0.0.1",
               SPARK_DAEMON_MEMORY="256m", SPARK_LOG_DIR=str(work_dir), SPARK_NO_DAEMONIZE="1",
               SPARK_DAEMON_JAVA_OPTS=f"-Dlog4j2.configurationFile=file:{log4j}")
    port, web_port = _free_port(), _free_port()
    master_url, web_url = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web_port}"
    procs: list[tuple[subprocess.Popen, Path]] = []

    def start(name: str, args: list[str]) -> None:
        log = work_dir / f"{name}.log"
        with log.open("wb") as out:
            # spark-class execs java: the pid is the JVM's own
            procs.append((subprocess.Popen([str(spark_class), *args], env=env, stdout=out,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL), log))

    def stop() -> None:
        for proc, _ in reversed(procs):  # workers (and with them their executors) first
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc, _ in reversed(procs):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()

    try:
        start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                         "--webui-port", str(web_port)])
        for i in range(workers):
            wdir = work_dir / f"worker-{i}"
            wdir.mkdir(exist_ok=True)
            start(f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                  "--cores", str(cores), "--memory", f"{memory_mib}m",
                                  "--webui-port", str(_free_port()), "--work-dir", str(wdir), master_url])
        deadline = time.monotonic() + start_timeout_s
        while _alive_workers(web_url) < workers:
            dead = [(p, log) for p, log in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                log = (dead[0] if dead else procs[0])[1]
                raise RuntimeError(f"Spark standalone cluster did not start ({'exited: ' + log.name if dead else 'timeout'});"
                                   f" log tail of {log}:\n{_log_tail(log)}")
            time.sleep(0.3)
        conf = {"spark.executor.cores": str(cores), "spark.executor.memory": f"{executor_memory_mib}m",
                "spark.cores.max": str(workers * cores), "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1"}
        yield StandaloneCluster(master_url, web_url, conf, [p.pid for p, _ in procs], work_dir)
    finally:
        stop()
