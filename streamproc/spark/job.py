"""The Spark job behind ``streamproc reprocess``: the topology's own tasks over history.

Plan (driver side):

1. Read every ``--input`` into one DataFrame of (topic, partition, offset, timestamp, key, value,
   error, source); rows with an ``error`` (unreadable file rows) go straight to the rejects.
2. Order the topology's sub-topologies so that a sub-topology runs after every sub-topology that
   writes a topic it reads (repartition topics). Each one is a *stage*.
3. For a stage: take its source topics' rows (inputs, or records earlier stages produced for it),
   range-partition them by Kafka partition (one task per partition, the sources co-partitioned),
   sort within each Spark partition by ``(partition, order key)`` (all on the JVM side) and run
   :func:`streamproc.spark.engine.process_batches` over them with ``DataFrame.mapInArrow``: the
   records reach the executors' Python workers as Arrow record batches, the topology's own
   operators and stores process each batch through ``Task.process``, and the outputs come back as
   Arrow record batches (no RDD of rows, no per-record Python object on the JVM side). The order key implements
   :mod:`streamproc.spark.ordering`. Records a stage writes to a topic a later stage reads carry
   their destination partition (Kafka's murmur2 partitioner), so the next stage's grouping is the
   Spark shuffle by key that replaces the repartition topic; see :func:`_stage_input` for the
   order in which a repartition partition's records are replayed.
4. The stage outputs are cached; the *update stream* is every record written to a non-internal
   sink topic, in the order the tasks produced it; the *final table* is the last update per
   ``(topic, key)`` (windowed keys include their window), tombstones removing the key.
5. Write the table (and with ``updates=True`` the update stream) and the rejects; return counts.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from .engine import StagePlan, load_topology, process_batches
from .ordering import ORDERS
from .sources import ENCODINGS, InputSpec, OutputSpec, encode_column, parse_input, parse_output, read_input

__all__ = ["ReprocessResult", "Stage", "compute", "module_archive", "plan_stages", "reprocess", "table_topics"]


@dataclass(frozen=True)
class Stage:
    """One sub-topology as a Spark stage."""

    subtopology_id: int
    source_topics: tuple[str, ...]
    sink_topics: tuple[str, ...]
    internal_sinks: tuple[str, ...]  # sinks that a later stage reads (their records feed it)


@dataclass
class ReprocessResult:
    """Counts of one run (``records_in``: records read from the inputs, rejected ones included)."""

    records_in: int = 0
    records_processed: int = 0
    records_out: int = 0
    table_rows: int = 0
    dropped: int = 0
    rejected: int = 0
    seconds: float = 0.0
    output: str = ""
    rejects_path: str | None = None
    order: str = "offset"
    stages: int = 0
    metrics: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        rate = self.records_in / self.seconds if self.seconds > 0 else 0.0
        lines = [
            (f"reprocess finished in {self.seconds:.1f} s ({rate:,.0f} records/s), order={self.order}, "
             f"{self.stages} stage(s)"),
            f"  records in:       {self.records_in}",
            f"  records out:      {self.records_out} updates, {self.table_rows} table rows",
            f"  dropped:          {self.dropped} (late or expired, by the operators)",
            f"  rejected:         {self.rejected}" + (f" -> {self.rejects_path}" if self.rejects_path else ""),
            f"  output:           {self.output}",
        ]
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Topology introspection
# --------------------------------------------------------------------------------------------


def _topics(obj: Any, name: str) -> tuple[str, ...]:
    return tuple(sorted(getattr(obj, name, None) or ()))


def _subtopologies(topology: Any, application_id: str | None) -> list[Any]:
    """Sub-topologies with internal (repartition) topics named for ``application_id``."""
    resolve = getattr(topology, "subtopologies_for", None)
    return list(resolve(application_id) if callable(resolve) else topology.subtopologies)


def plan_stages(topology: Any, application_id: str | None = None) -> list[Stage]:
    """Sub-topologies in dependency order (a writer of a topic before its readers)."""
    subs = _subtopologies(topology, application_id)
    info = {s.id: (set(_topics(s, "source_topics")), set(_topics(s, "sink_topics")) |
                   set(_topics(s, "repartition_topics"))) for s in subs}
    readers: dict[str, set[int]] = {}
    for sid, (sources, _) in info.items():
        for t in sources:
            readers.setdefault(t, set()).add(sid)
    order: list[int] = []
    done: set[int] = set()
    pending = sorted(info)
    while pending:
        progressed = False
        for sid in list(pending):
            deps = {w for w, (_, sinks) in info.items() if w != sid and sinks & info[sid][0]}
            if deps <= done:
                order.append(sid)
                done.add(sid)
                pending.remove(sid)
                progressed = True
        if not progressed:
            raise ValueError(f"sub-topologies {pending} read each other's output in a cycle; "
                             "reprocessing needs an acyclic topology")
    stages = []
    for sid in order:
        sources, sinks = info[sid]
        internal = tuple(sorted(t for t in sinks if readers.get(t, set()) - {sid}))
        stages.append(Stage(sid, tuple(sorted(sources)), tuple(sorted(sinks)), internal))
    return stages


TABLE_OPS = ("table", "versioned-table")


def table_topics(topology: Any) -> tuple[str, ...]:
    """Source topics read as tables (``builder.table``: a source feeding a table operator)."""
    found: set[str] = set()
    for node in getattr(topology, "nodes", ()):
        if node.kind == "source" and any(c.op in TABLE_OPS for c in node.children):
            found.update(node.topics)
    return tuple(sorted(found))


def repartition_topics(topology: Any, application_id: str | None = None) -> set[str]:
    out: set[str] = set()
    for sub in _subtopologies(topology, application_id):
        out |= set(getattr(sub, "repartition_topics", None) or ())
    return out


def _module_root(module: str) -> tuple[str, ...]:
    """The sys.path entry the module was imported from (shipped to local-mode Python workers)."""
    module = module.partition(":")[0]
    mod = sys.modules.get(module)
    origin = getattr(mod, "__file__", None)
    if not origin:
        return ()
    root = Path(origin).resolve().parent
    for _ in range(module.count(".") + (1 if Path(origin).name == "__init__.py" else 0)):
        root = root.parent
    return (str(root),)


def _installed(path: Path) -> bool:
    return any(part in ("site-packages", "dist-packages") for part in path.parts)


def module_archive(module: str, dest_dir: str | Path) -> Path | None:
    """A zip of the topology module's top-level package (or its single file) for the executors'
    ``sys.path``, written into ``dest_dir``; None when the module was imported from an installed
    distribution (site-/dist-packages: the executors need it installed too) or is not a file.

    Only ``.py``/``.pyi`` files and ``py.typed`` go in (no ``__pycache__``, no compiled
    extensions: those must be installed on the executors)."""
    import zipfile

    name = module.partition(":")[0]
    top = name.split(".", 1)[0]
    roots = _module_root(name)
    if not roots:
        return None
    root = Path(roots[0])
    pkg, single = root / top, root / f"{top}.py"
    if _installed(root) or not (pkg.is_dir() or single.is_file()):
        return None
    dest = Path(dest_dir) / f"streamproc-topology-{top}.zip"
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        if pkg.is_dir():
            for f in sorted(pkg.rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and (f.suffix in (".py", ".pyi")
                                                                     or f.name == "py.typed"):
                    zf.write(f, str(f.relative_to(root)))
        else:
            zf.write(single, single.name)
    return dest


_SHIPPED: dict[tuple[int, str], bool] = {}


def _ship_module(spark: Any, module: str) -> tuple[str, ...]:
    """Make the topology module importable by the Python workers; the ``StagePlan.sys_path`` to use.

    Local mode: the workers run on this machine, so the directory the driver imported the module
    from is put on their path. Any other master: the module's top-level package (or file) is zipped
    and added with ``SparkContext.addPyFile`` once per context (the executors do not share the
    driver's directories); a module imported from an installed distribution is not shipped."""
    sc = spark.sparkContext
    if sc.master.startswith("local"):
        return _module_root(module)
    key = (id(sc), module.partition(":")[0].split(".", 1)[0])
    if key not in _SHIPPED:
        import tempfile

        archive = module_archive(module, tempfile.mkdtemp(prefix="streamproc-ship-"))
        if archive is not None:
            sc.addPyFile(str(archive))
        _SHIPPED[key] = True
    return ()


# --------------------------------------------------------------------------------------------
# The Spark plan
# --------------------------------------------------------------------------------------------


def _out_schema() -> Any:
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("kind", T.StringType(), False), T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()), T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.LongType()), T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()), T.StructField("dest_partition", T.IntegerType()),
        T.StructField("info", T.StringType()), T.StructField("source", T.StringType()),
    ])


def _ordered(df: Any, order: str, n_sources: int, tables: Sequence[str], n_partitions: int) -> Any:
    """Range-partition by Kafka partition and sort each Spark partition into replay order."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = df.repartitionByRange(max(1, n_partitions), "partition")
    if order == "offset":
        if n_sources > 1:
            # Kafka Streams' merge (smallest head timestamp first) == sort by the running max of the
            # timestamp within each topic-partition, then topic, then offset (see ordering.py).
            w = (Window.partitionBy("partition", "topic").orderBy("offset")
                 .rowsBetween(Window.unboundedPreceding, Window.currentRow))
            df = df.withColumn("_order", F.max("timestamp").over(w))
            return df.sortWithinPartitions("partition", "_order", "topic", "offset")
        return df.sortWithinPartitions("partition", "topic", "offset")
    table_first = F.when(F.col("topic").isin(list(tables)), F.lit(0)).otherwise(F.lit(1)) if tables else F.lit(1)
    df = df.withColumn("_order", table_first)
    return df.sortWithinPartitions("partition", "timestamp", "_order", "topic", "offset")


_FED = ("topic", "partition", "offset", "timestamp", "key", "value", "source")


def _stage_input(prior: Iterable[Any], topics: Sequence[str]) -> list[Any]:
    """Records earlier stages wrote to ``topics``, as input rows of the reading stage.

    A repartition partition receives each producing task's records in that task's production
    order (as Kafka keeps one producer's order); the producers' sequences are merged by smallest
    head timestamp, ties to the lower producing partition (the same merge rule as ``offset``
    order, via the running-max trick), and numbered from 0: those are the offsets."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frames = []
    run = (Window.partitionBy("topic", "dest_partition", "partition").orderBy("offset")
           .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    number = Window.partitionBy("topic", "dest_partition").orderBy("_head", "partition", "offset")
    for out in prior:
        df = out.filter((F.col("kind") == "out") & F.col("topic").isin(list(topics)))
        df = df.withColumn("_head", F.max("timestamp").over(run))
        frames.append(df.select(
            F.col("topic"), F.col("dest_partition").alias("partition"),
            (F.row_number().over(number) - 1).cast("long").alias("offset"),
            F.col("timestamp"), F.col("key"), F.col("value"),
            F.lit(None).cast("string").alias("error"), F.lit(None).cast("string").alias("source")))
    return frames


def _union(frames: Sequence[Any]) -> Any:
    return functools.reduce(lambda a, b: a.unionByName(b), frames)


@dataclass
class Computed:
    """The DataFrames of one computation (before writing): cached stage outputs included."""

    updates: Any
    table: Any
    rejects: Any
    result: ReprocessResult
    cached: list[Any]

    def unpersist(self) -> None:
        for df in self.cached:
            df.unpersist()


def _log(msg: str, quiet: bool) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


class InputPlan(NamedTuple):
    """What :func:`check_inputs` found: the application id, the stages, the internal topics the
    stages produce and the external topics the inputs give."""

    app_id: str
    stages: list[Stage]
    produced: set[str]
    external: set[str]


def check_inputs(topology: Any, module: str, specs: Sequence[InputSpec],
                 application_id: str | None = None) -> InputPlan:
    """The :class:`InputPlan` of ``topology`` when ``specs`` give exactly its external source topics
    (each once); a ``ValueError`` naming the topics otherwise. The application id defaults to the
    module's last name. Runs no Spark job."""
    app_id = application_id or module.partition(":")[0].rsplit(".", 1)[-1]
    stages = plan_stages(topology, app_id)
    produced = {t for st in stages for t in st.internal_sinks}
    sources = {t for st in stages for t in st.source_topics}
    external = sources - produced
    given = [s.topic for s in specs]
    dup = sorted({t for t in given if given.count(t) > 1})
    if dup:
        raise ValueError(f"--input given twice for topic(s) {dup}")
    unknown = sorted(set(given) - external)
    if unknown:
        raise ValueError(f"--input topic(s) {unknown} are not external source topics of {module!r}; "
                         f"it reads {sorted(external)}" + (f" (internal: {sorted(produced)})" if produced else ""))
    missing = sorted(external - set(given))
    if missing:
        raise ValueError(f"source topic(s) {missing} of {module!r} have no --input TOPIC=SOURCE")
    return InputPlan(app_id, stages, produced, external)


def compute(spark: Any, module: str, inputs: Sequence[InputSpec | str], *, order: str = "offset",
            bootstrap_servers: str | None = None, encoding: str = "text",
            application_id: str | None = None, repartition_partitions: int | None = None,
            kafka_options: Mapping[str, str] | None = None, quiet: bool = False) -> Computed:
    """Run the topology over the inputs; return the (cached) update stream, table and rejects.

    Raises ``ValueError`` for a bad request (unknown order, an input topic the topology does not
    read, a source topic without input) before any Spark job runs.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; choose one of {ORDERS}")
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; choose one of {ENCODINGS}")
    specs = [parse_input(s) if isinstance(s, str) else s for s in inputs]
    topology = load_topology(module)
    app_id, stages, produced, external = check_inputs(topology, module, specs, application_id)
    tables = table_topics(topology)
    internal_topics = repartition_topics(topology, app_id)
    sys_path = _ship_module(spark, module)
    t0 = time.perf_counter()

    raw = _union([read_input(spark, s, encoding=encoding, bootstrap_servers=bootstrap_servers,
                             kafka_options=dict(kafka_options or {})) for s in specs])
    # Kafka inputs are read once (a second read could see records appended meanwhile) and JSON is
    # parsed once; Parquet files are cheaper to read again than to cache
    cache_raw = any(s.kind != "parquet" for s in specs)
    if cache_raw:
        raw = raw.persist(StorageLevel.MEMORY_AND_DISK)
    stats = raw.groupBy("topic").agg(F.count(F.lit(1)).alias("n"), F.max("partition").alias("p"),
                                     F.count("error").alias("bad")).collect()
    counts = {r["topic"]: int(r["p"]) + 1 if r["p"] is not None else 1 for r in stats}
    records_in = sum(int(r["n"]) for r in stats)
    pre_rejected = sum(int(r["bad"]) for r in stats)
    _log(f"reprocess {module}: {records_in} input records ({pre_rejected} unreadable) from "
         f"{', '.join(map(str, specs))}; order={order}; {len(stages)} stage(s)", quiet)
    valid = raw.filter(F.col("error").isNull())
    cached: list[Any] = [raw] if cache_raw else []
    outputs: list[Any] = []
    produced_by: dict[str, Any] = {}
    result = ReprocessResult(order=order, stages=len(stages), records_in=records_in)
    metric_totals: dict[str, int] = {}
    stage_rejected = 0
    for i, stage in enumerate(stages, 1):
        for t in stage.internal_sinks:  # Kafka Streams sizes repartition topics like the writer's inputs
            counts[t] = repartition_partitions or max((counts.get(s, 1) for s in stage.source_topics), default=1)
        ext = [t for t in stage.source_topics if t in external]
        frames = [valid.filter(F.col("topic").isin(ext))] if ext else []
        frames += _stage_input([produced_by[t] for t in stage.source_topics if t in produced_by],
                               [t for t in stage.source_topics if t in produced])
        stage_in = _union(frames)
        n_parts = max((counts.get(t, 1) for t in stage.source_topics), default=1)
        ordered = _ordered(stage_in, order, len(stage.source_topics), tables, n_parts)
        plan = StagePlan(module, app_id, stage.subtopology_id,
                         {t: counts[t] for t in stage.internal_sinks}, sys_path)
        out = (ordered.select(*_FED).mapInArrow(functools.partial(process_batches, plan), _out_schema())
               .persist(StorageLevel.MEMORY_AND_DISK))
        cached.append(out)
        _log(f"stage {i}/{len(stages)}: sub-topology {stage.subtopology_id} reads "
             f"{', '.join(stage.source_topics)} over {n_parts} partition(s)", quiet)
        for row in out.filter(F.col("kind") == "metrics").select("info").collect():
            m = json.loads(row["info"])
            result.records_processed += m["records_in"]
            stage_rejected += m["rejected"]
            for k, v in m["metrics"].items():
                metric_totals[k] = metric_totals.get(k, 0) + int(v)
        outputs.append(out)
        for t in stage.internal_sinks:
            produced_by[t] = out

    updates = _union([o.filter((F.col("kind") == "out") & ~F.col("topic").isin(list(internal_topics)))
                      .select("topic", "partition", "offset", "timestamp", "key", "value") for o in outputs])
    from pyspark.sql import Window

    last = Window.partitionBy("topic", "key").orderBy(F.col("partition").desc(), F.col("offset").desc())
    table = (updates.filter(F.col("key").isNotNull()).withColumn("_n", F.row_number().over(last))
             .filter((F.col("_n") == 1) & F.col("value").isNotNull()).drop("_n")
             .persist(StorageLevel.MEMORY_AND_DISK))  # written, then counted: computed once
    cached.append(table)
    stage_rejects = [o.filter(F.col("kind") == "reject").select(
        "topic", "partition", "offset", "timestamp", "key", "value", F.col("info").alias("error"), "source")
        for o in outputs]
    rejects = _union([raw.filter(F.col("error").isNotNull()).select(
        "topic", "partition", "offset", "timestamp", "key", "value", "error", "source"), *stage_rejects])
    result.metrics = metric_totals
    result.dropped = _dropped(metric_totals)
    result.rejected = pre_rejected + stage_rejected  # each task's metrics row counts its rejects
    result.seconds = time.perf_counter() - t0
    return Computed(updates, table, rejects, result, cached)


def _dropped(metrics: Mapping[str, int]) -> int:
    """Total records the operators dropped: ``dropped_records`` if the task reports a total, else
    the sum of every ``dropped*`` counter."""
    if "dropped_records" in metrics:
        return int(metrics["dropped_records"])
    return sum(int(v) for k, v in metrics.items() if k.startswith("dropped"))


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def _write_files(df: Any, kind: str, path: str, encoding: str, overwrite: bool) -> None:
    from pyspark.sql import functions as F

    if encoding == "binary" and kind == "json":
        raise ValueError("--encoding binary needs Parquet output (JSON has no bytes type)")
    cols = [F.col("topic"), encode_column(F, F.col("key"), encoding).alias("key"),
            encode_column(F, F.col("value"), encoding).alias("value"), F.col("timestamp"),
            F.col("partition"), F.col("offset")]
    writer = df.select(*cols).sortWithinPartitions("topic", "partition", "offset").write
    writer = writer.mode("overwrite" if overwrite else "errorifexists")
    (writer.parquet if kind == "parquet" else writer.json)(path)


def _kafka_topic_column(F: Any, template: str) -> Any:
    if "{topic}" not in template:
        return F.lit(template)
    head, _, tail = template.partition("{topic}")
    if "{topic}" in tail:
        raise ValueError(f"--output kafka:{template}: '{{topic}}' may appear once")
    return F.concat(F.lit(head), F.col("topic"), F.lit(tail))


def _write_kafka(df: Any, template: str, bootstrap_servers: str | None,
                 kafka_options: Mapping[str, str] | None) -> None:
    """Write records to Kafka; the sink topic and the record timestamp travel as headers
    ``streamproc.topic`` / ``streamproc.timestamp`` (Spark's Kafka sink cannot set timestamps)."""
    from pyspark.sql import functions as F

    if not bootstrap_servers:
        raise ValueError("--output kafka:... needs --bootstrap-servers")
    headers = F.array(
        F.struct(F.lit("streamproc.topic").alias("key"), F.encode(F.col("topic"), "UTF-8").alias("value")),
        F.struct(F.lit("streamproc.timestamp").alias("key"),
                 F.encode(F.col("timestamp").cast("string"), "UTF-8").alias("value")))
    out = df.sortWithinPartitions("partition", "offset").select(
        _kafka_topic_column(F, template).alias("topic"), "key", "value", headers.alias("headers"))
    writer = out.write.format("kafka").option("kafka.bootstrap.servers", bootstrap_servers)
    for k, v in (kafka_options or {}).items():
        if k.startswith("kafka."):
            writer = writer.option(k, v)
    writer.save()


def _write_rejects(df: Any, path: str) -> None:
    from pyspark.sql import functions as F

    (df.select("topic", "partition", "offset", "timestamp", "error", "source",
               F.base64("key").alias("key_base64"), F.base64("value").alias("value_base64"))
     .coalesce(1).write.mode("overwrite").json(path))


def reprocess(spark: Any, module: str, inputs: Sequence[InputSpec | str], output: OutputSpec | str, *,
              order: str = "offset", updates: bool = False, bootstrap_servers: str | None = None,
              rejects: str | None = None, encoding: str = "text", application_id: str | None = None,
              repartition_partitions: int | None = None, overwrite: bool = False,
              kafka_options: Mapping[str, str] | None = None, quiet: bool = False) -> ReprocessResult:
    """Reprocess and write: the final table (and with ``updates`` the update stream) and rejects.

    Directory output: ``DEST/table/`` and ``DEST/updates/`` (columns topic, key, value, timestamp,
    partition, offset; key/value per ``encoding``); rejects default to ``DEST/_rejects``.
    Kafka output (``kafka:TOPIC``, ``{topic}`` = sink topic): the update stream with ``updates``,
    else the table; rejects default to ``./streamproc-rejects``.
    """
    dest = parse_output(output) if isinstance(output, str) else output
    if dest.kind == "json" and encoding == "binary":
        raise ValueError("--encoding binary needs Parquet output (JSON has no bytes type)")
    t0 = time.perf_counter()
    comp = compute(spark, module, inputs, order=order, bootstrap_servers=bootstrap_servers,
                   encoding="text" if encoding == "binary" else encoding, application_id=application_id,
                   repartition_partitions=repartition_partitions, kafka_options=kafka_options, quiet=quiet)
    res = comp.result
    try:
        if dest.kind == "kafka":
            _write_kafka(comp.updates if updates else comp.table, dest.location, bootstrap_servers, kafka_options)
            res.output = f"kafka:{dest.location} ({'updates' if updates else 'table'})"
            rejects_dir = rejects or os.path.join(os.getcwd(), "streamproc-rejects")
        else:
            _write_files(comp.table, dest.kind, os.path.join(dest.location, "table"), encoding, overwrite)
            if updates:
                _write_files(comp.updates, dest.kind, os.path.join(dest.location, "updates"), encoding, overwrite)
            res.output = f"{dest.kind}:{dest.location} (table/{', updates/' if updates else ''})"
            rejects_dir = rejects or os.path.join(dest.location, "_rejects")
        res.records_out = comp.updates.count()
        res.table_rows = comp.table.count()
        if res.rejected:
            _write_rejects(comp.rejects, rejects_dir)
            res.rejects_path = rejects_dir
    finally:
        comp.unpersist()
    res.seconds = time.perf_counter() - t0
    return res
