"""Benchmark: offline reprocessing on Spark (local[2]) vs the in-process Task path, same data.

    .venv/bin/python -m benchmarks.bench_spark                      # 1M records, both topologies
    .venv/bin/python -m benchmarks.bench_spark --records 200000 --topologies sessions

For each example topology it generates N records (4 partitions; the generators of
tests/support/spark.py), writes them as JSON lines, then measures

- Spark start-up: JVM + SparkContext + first job (reported separately, not in the rates);
- Spark reprocess: ``streamproc.spark.job.reprocess`` reading the JSON lines, running the
  topology's tasks in the Python workers, writing the table and the update stream as Parquet;
- the baseline: the same Tasks run in this process, one after the other, in the same order, on
  already-decoded records (``tests.support.spark.run_reference``): what a single daemon core does.

It prints records/s for each, the Spark/in-process ratio, and peak RSS (this process; children =
the JVM and the Python workers). Figures depend on the machine's load: run it alone.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from streamproc.spark.job import reprocess
from streamproc.spark.session import timed_session
from tests.support.spark import gen_currency_input, gen_sessions_input, run_reference, write_jsonl


def _rss_mib(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def _peak_rss_mib(pid: int) -> float:
    """VmHWM (peak resident set) of a live process, from /proc; 0 when unavailable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--topologies", default="sessions,currency")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--order", default="offset", choices=["offset", "event-time"])
    args = ap.parse_args()
    n = args.records
    work = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    rows = []
    try:
        spark, startup = timed_session(master=args.master, kafka=False, app_name="bench-spark")
        print(f"Spark start-up ({args.master}, JVM + context + first job): {startup:.1f} s", flush=True)
        for name in args.topologies.split(","):
            t0 = time.perf_counter()
            if name == "sessions":
                recs = gen_sessions_input(n, partitions=4)
                inputs = [f"clicks={write_jsonl(work / 'clicks.jsonl', recs)}"]
                tables: list[str] = []
            elif name == "currency":
                recs = gen_currency_input(n, partitions=4)
                inputs = [f"rates={write_jsonl(work / 'rates.jsonl', [r for r in recs if r.topic == 'rates'])}",
                          f"payments={write_jsonl(work / 'payments.jsonl', [r for r in recs if r.topic == 'payments'])}"]
                tables = ["rates"]
            else:
                raise SystemExit(f"unknown topology {name!r}; use sessions and/or currency")
            print(f"{name}: generated and wrote {n:,} records in {time.perf_counter() - t0:.1f} s", flush=True)

            import importlib

            topology = importlib.import_module(f"topologies.{name}").build()
            t0 = time.perf_counter()
            ref, _ = run_reference(topology, recs, order=args.order, application_id=name, tables=tables)
            base_s = time.perf_counter() - t0
            print(f"{name}: in-process tasks {base_s:.1f} s ({n / base_s:,.0f} records/s), "
                  f"{len(ref):,} updates", flush=True)

            out = work / f"out-{name}"
            t0 = time.perf_counter()
            res = reprocess(spark, f"topologies.{name}", inputs, str(out), order=args.order, updates=True,
                            application_id=name, quiet=True)
            spark_s = time.perf_counter() - t0
            assert res.records_out == len(ref), (res.records_out, len(ref))
            print(f"{name}: spark {spark_s:.1f} s ({n / spark_s:,.0f} records/s), {res.records_out:,} updates, "
                  f"{res.table_rows:,} table rows, {res.stages} stage(s)", flush=True)
            rows.append((name, n, n / base_s, n / spark_s, res.stages))
            shutil.rmtree(out, ignore_errors=True)
        jvm_peak = _peak_rss_mib(int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"records={n:,} order={args.order} master={args.master} cores={os.cpu_count()} "
          f"load1={os.getloadavg()[0]:.1f}")
    print(f"{'topology':<10} {'stages':>6} {'in-process rec/s':>17} {'spark rec/s':>12} {'spark/in-process':>17}")
    for name, _, base, sp, stages in rows:
        print(f"{name:<10} {stages:>6} {base:>17,.0f} {sp:>12,.0f} {sp / base:>17.2f}")
    print(f"Spark start-up: {startup:.1f} s (not included above)")
    print(f"peak RSS: this process (driver + in-process baseline) {_rss_mib(resource.RUSAGE_SELF):,.0f} MiB; "
          f"Spark JVM {jvm_peak:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
