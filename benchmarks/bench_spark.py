"""Benchmark: offline reprocessing on Spark (local[1], local[2], a 2-worker standalone cluster) next to
the in-process Task path, on the same records; results checked identical everywhere.

    .venv/bin/python -m benchmarks.bench_spark --quick          # 200k records
    .venv/bin/python -m benchmarks.bench_spark                  # 1M and 5M records
    .venv/bin/python -m benchmarks.bench_spark --records 500000 --topologies sessions --masters 'local[1]'

For each size and example topology (``sessions``: session windows; ``currency``: a repartition hop
and a versioned-table join) it generates the records (4 partitions; the generators of
tests/support/spark.py) and writes them as Parquet (binary key/value), then measures

- **in-process**: the same Tasks run in this process one after the other, in the same replay
  order, fed runs of up to 10,000 records per ``Task.process`` call, on already-decoded Python
  records (``tests.support.spark.run_reference(batch=10000)``): what one daemon core does with no
  Kafka I/O;
- **Spark**, once per master, each in a fresh process (its own driver JVM): start-up (JVM +
  context + first job + a warm-up job of 20,000 records per topology) apart, then the job (``streamproc.spark.job.reprocess``: read the Parquet
  input, order it, run the topology's tasks in the Python workers over Arrow batches, write the
  table and the update stream as Parquet). The standalone cluster is a master and two workers of
  one core each on 127.0.0.1 (``tests.support.spark.standalone_cluster``).

Rates are input records / seconds. The update stream each master wrote is read back with pyarrow,
sorted by (topic, task partition, sequence) and its digest compared with the in-process result's;
the table's digest is compared across masters: any difference fails the run. Peak RSS is sampled
every 0.2 s while the job runs: the JVMs (driver; on the cluster also the executors) and the
Spark Python workers, summed per kind. Figures depend on the machine's load: run it alone.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Self

ORDER_FIELDS = [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]
SLICE = 100_000
WARMUP = 20_000  # records of each topology's warm-up job (part of the start-up, not measured)
PARTITIONS = 4


# --------------------------------------------------------------------------------------------
# Processes and their memory
# --------------------------------------------------------------------------------------------


def _status_kib(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    return kids


def _descendants(roots: list[int]) -> list[int]:
    kids = _children()
    out, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, ()))
    return out


def _kind(pid: int) -> str | None:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return None
    if b"java" in cmd.split(b" ", 1)[0]:
        return "jvm"
    if b"pyspark" in cmd or b"python" in cmd.split(b" ", 1)[0]:
        return "python"
    return None


def _cpu_ticks(pid: int) -> int:
    """User + system CPU time of ``pid`` so far (clock ticks; 0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


class RssSampler:
    """Peak of the summed resident set (VmRSS) of the JVMs and of the Python workers among the
    descendants of ``roots`` (this process excluded), sampled every ``interval`` seconds; and the
    CPU seconds they used meanwhile (:attr:`cpu_seconds`: per process, last sample minus first; a
    worker's CPU before its first sample or after its last is missed)."""

    def __init__(self, roots: list[int], interval: float = 0.2) -> None:
        self.roots, self.interval = roots, interval
        self.peak = {"jvm": 0, "python": 0}
        self._first: dict[int, int] = {}
        self._last: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        total = {"jvm": 0, "python": 0}
        me = os.getpid()
        for pid in _descendants(self.roots):
            kind = _kind(pid) if pid != me else None
            if kind:
                total[kind] += _status_kib(pid, "VmRSS")
                ticks = _cpu_ticks(pid)
                self._first.setdefault(pid, ticks)
                self._last[pid] = max(self._last.get(pid, 0), ticks)
        for k, v in total.items():
            self.peak[k] = max(self.peak[k], v)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    @property
    def cpu_seconds(self) -> float:
        return sum(self._last[p] - self._first[p] for p in self._last) / os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> Self:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


# --------------------------------------------------------------------------------------------
# Child: one master, one fresh driver
# --------------------------------------------------------------------------------------------


def child(master: str, jobs: list[dict[str, Any]], warmups: list[dict[str, Any]], conf: dict[str, str],
          cluster_pids: list[int]) -> dict[str, Any]:
    from streamproc.spark.job import reprocess
    from streamproc.spark.session import timed_session

    spark, startup = timed_session(master=master, kafka=False, app_name="bench-spark", conf=conf)
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    t0 = time.perf_counter()
    for job in warmups:  # the same topologies on small inputs: Python workers up, JVM code compiled
        reprocess(spark, job["module"], job["inputs"], job["out"], order=job["order"], updates=True,
                  encoding="binary", application_id=job["name"], overwrite=True, quiet=True)
    warmup = time.perf_counter() - t0
    results = []
    for job in jobs:
        gc.collect()
        with RssSampler([jvm_pid, *cluster_pids]) as rss:
            t0 = time.perf_counter()
            res = reprocess(spark, job["module"], job["inputs"], job["out"], order=job["order"], updates=True,
                            encoding="binary", application_id=job["name"], overwrite=True, quiet=True)
            seconds = time.perf_counter() - t0
        results.append({"name": job["name"], "n": job["n"], "seconds": seconds, "records_out": res.records_out,
                        "table_rows": res.table_rows, "records_in": res.records_in,
                        "jvm_mib": rss.peak["jvm"] / 1024, "python_mib": rss.peak["python"] / 1024,
                        "cpu_s": rss.cpu_seconds})
    spark.stop()
    return {"master": master, "startup": startup, "warmup": warmup, "jobs": results}


# --------------------------------------------------------------------------------------------
# Parent
# --------------------------------------------------------------------------------------------


def _digest_rows(rows: Any) -> str:
    """sha256 over fixed slices of (topic, key, value, timestamp) rows (any sequence of 4-tuples)."""
    h = hashlib.sha256()
    for i in range(0, len(rows), SLICE):
        h.update(repr(list(rows[i:i + SLICE])).encode())
    return h.hexdigest()


def _digest_parquet(path: Path, sort: list[tuple[str, str]], cols: list[str]) -> tuple[str, int]:
    import pyarrow.parquet as pq

    table = pq.read_table(path).sort_by(sort).select(cols)
    h = hashlib.sha256()
    for i in range(0, table.num_rows, SLICE):
        part = table.slice(i, SLICE)
        h.update(repr(list(zip(*(c.to_pylist() for c in part.columns)))).encode())
    return h.hexdigest(), table.num_rows


def _write_input(path: Path, records: list[Any]) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        "key": pa.array([r.key for r in records], pa.binary()),
        "value": pa.array([r.value for r in records], pa.binary()),
        "timestamp": pa.array([r.timestamp for r in records], pa.int64()),
        "partition": pa.array([r.partition for r in records], pa.int32()),
        "offset": pa.array([r.offset for r in records], pa.int64()),
    })
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path / "part-0.parquet", row_group_size=256 * 1024)
    return str(path)


def _prepare(name: str, n: int, work: Path, order: str, baseline: bool = True) -> dict[str, Any]:
    """Generate and write the input; run the in-process baseline (unless not ``baseline``); the job
    description."""
    import importlib

    from tests.support.spark import gen_currency_input, gen_sessions_input, run_reference

    t0 = time.perf_counter()
    if name == "sessions":
        recs = gen_sessions_input(n, partitions=PARTITIONS)
        inputs = [f"clicks=parquet:{_write_input(work / f'{name}-{n}' / 'clicks', recs)}"]
        tables: list[str] = []
    elif name == "currency":
        recs = gen_currency_input(n, partitions=PARTITIONS)
        inputs = [f"{t}=parquet:{_write_input(work / f'{name}-{n}' / t, [r for r in recs if r.topic == t])}"
                  for t in ("rates", "payments")]
        tables = ["rates"]
    else:
        raise SystemExit(f"unknown topology {name!r}; use sessions and/or currency")
    job = {"name": name, "n": n, "module": f"topologies.{name}", "inputs": inputs, "order": order,
           "out": str(work / f"{name}-{n}" / "out")}
    if not baseline:
        return job
    print(f"{name} {n:,}: generated and wrote the input in {time.perf_counter() - t0:.1f} s", flush=True)
    topology = importlib.import_module(f"topologies.{name}").build()
    gc.collect()
    t0 = time.perf_counter()
    ref, rejected = run_reference(topology, recs, order=order, application_id=name, tables=tables, batch=10_000)
    base_s = time.perf_counter() - t0
    assert rejected == 0
    ref.sort(key=lambda u: u.topic)  # tasks in (stage, partition) order, each in production order
    digest = _digest_rows([tuple(u) for u in ref])
    print(f"{name} {n:,}: in-process {base_s:.1f} s ({n / base_s:,.0f} records/s), {len(ref):,} updates",
          flush=True)
    del recs, ref
    gc.collect()
    return {**job, "base_s": base_s, "digest": digest}


def _run_master(master: str, jobs: list[dict[str, Any]], warmups: list[dict[str, Any]], conf: dict[str, str],
                cluster_pids: list[int], spark_master: str) -> dict[str, Any]:
    spec = json.dumps({"master": spark_master, "jobs": jobs, "warmups": warmups, "conf": conf,
                       "cluster_pids": cluster_pids})
    proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_spark", "--child", spec],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{master}: the Spark run failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", default="1000000,5000000", help="comma-separated input sizes")
    ap.add_argument("--quick", action="store_true", help="200,000 records only")
    ap.add_argument("--topologies", default="sessions,currency")
    ap.add_argument("--masters", default="local[1],local[2],standalone",
                    help="comma-separated: local[N] masters and/or 'standalone' (2 workers x 1 core, started here)")
    ap.add_argument("--order", default="offset", choices=["offset", "event-time"])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(child(spec["master"], spec["jobs"], spec["warmups"], spec["conf"], spec["cluster_pids"])))
        return 0

    from tests.support.spark import standalone_cluster

    sizes = [200_000] if args.quick else [int(x) for x in args.records.split(",")]
    masters = args.masters.split(",")
    work = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    rows: list[dict[str, Any]] = []
    startups: dict[str, list[float]] = {}
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    try:
        warmups = []
        for name in args.topologies.split(","):
            w = _prepare(name, WARMUP, work / "warmup", args.order, baseline=False)
            warmups.append({k: w[k] for k in ("name", "n", "module", "inputs", "order", "out")})
        for n in sizes:
            jobs = [_prepare(name, n, work, args.order) for name in args.topologies.split(",")]
            spark_jobs = [{k: j[k] for k in ("name", "n", "module", "inputs", "order")} for j in jobs]
            per_master: dict[str, dict[str, Any]] = {}
            for master in masters:
                for j, sj in zip(jobs, spark_jobs):
                    sj["out"] = f"{j['out']}-{master.replace('[', '').replace(']', '')}"
                if master == "standalone":
                    with standalone_cluster(work / "cluster", workers=2, cores=1, memory_mib=1536,
                                            executor_memory_mib=1024) as cluster:
                        got = _run_master(master, spark_jobs, warmups, cluster.conf, cluster.pids,
                                          cluster.master_url)
                else:
                    got = _run_master(master, spark_jobs, warmups, {}, [], master)
                startups.setdefault(master, []).append(got["startup"])
                print(f"{master}: start-up {got['startup']:.1f} s, warm-up jobs {got['warmup']:.1f} s", flush=True)
                for j, sj, r in zip(jobs, spark_jobs, got["jobs"]):
                    digest, count = _digest_parquet(Path(sj["out"]) / "updates", ORDER_FIELDS,
                                                    ["topic", "key", "value", "timestamp"])
                    table, _ = _digest_parquet(Path(sj["out"]) / "table", [("topic", "ascending"),
                                                                           ("key", "ascending")],
                                               ["topic", "key", "value", "timestamp"])
                    if digest != j["digest"]:
                        raise SystemExit(f"{j['name']} {n:,} on {master}: the update stream differs from the "
                                         f"in-process result ({count:,} rows)")
                    r["table_digest"] = table
                    per_master.setdefault(j["name"], {})[master] = r
                    print(f"{j['name']} {n:,} on {master}: job {r['seconds']:.1f} s ({n / r['seconds']:,.0f} "
                          f"records/s), {r['records_out']:,} updates = in-process, peak RSS JVM "
                          f"{r['jvm_mib']:,.0f} MiB, Python workers {r['python_mib']:,.0f} MiB; CPU of JVMs and workers "
                          f"{r['cpu_s']:.1f} s = {r['cpu_s'] / r['seconds']:.2f} cores busy", flush=True)
                    shutil.rmtree(sj["out"], ignore_errors=True)
            for j in jobs:
                tables = {m: r["table_digest"] for m, r in per_master[j["name"]].items()}
                if len(set(tables.values())) != 1:
                    raise SystemExit(f"{j['name']} {n:,}: the final tables differ between masters: {tables}")
                rows.append({"name": j["name"], "n": n, "base": n / j["base_s"],
                             "spark": {m: r for m, r in per_master[j["name"]].items()}})
            for j in jobs:
                shutil.rmtree(Path(j["out"]).parent, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"run {started}; order={args.order}; {PARTITIONS} input partitions; cores={os.cpu_count()} "
          f"load1={os.getloadavg()[0]:.1f}; results identical on every master (update stream = in-process)")
    head = f"{'topology':<9} {'records':>9} {'in-process':>11}" + "".join(f" {m:>11}" for m in masters)
    ratios = [("local[1]/in-process", "local[1]", None), ("local[2]/local[1]", "local[2]", "local[1]"),
              ("standalone/local[1]", "standalone", "local[1]")]
    ratios = [r for r in ratios if r[1] in masters and (r[2] is None or r[2] in masters)]
    print(head + "".join(f" {r[0]:>20}" for r in ratios) + "   (records/s)")
    for row in rows:
        rate = {m: row["n"] / r["seconds"] for m, r in row["spark"].items()}
        line = f"{row['name']:<9} {row['n']:>9,} {row['base']:>11,.0f}" + "".join(f" {rate[m]:>11,.0f}"
                                                                                for m in masters)
        for _, a, b in ratios:
            line += f" {rate[a] / (rate[b] if b else row['base']):>20.2f}"
        print(line)
    print("peak RSS (MiB) during the job, JVMs / Python workers:")
    for row in rows:
        print(f"  {row['name']:<9} {row['n']:>9,}: " + "; ".join(
            f"{m} {r['jvm_mib']:,.0f} / {r['python_mib']:,.0f}" for m, r in row["spark"].items()))
    print("Spark start-up (s, not in the rates): " + ", ".join(
        f"{m} {min(v):.1f}" for m, v in startups.items()))
    print(f"this process (generator, in-process baseline) peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
