"""The executor side of reprocessing: run one sub-topology's tasks over ordered input batches.

:func:`process_batches` is what every Spark partition runs (through ``DataFrame.mapInArrow``): it
receives the partition's rows as Arrow record batches, already sorted by ``(partition, <order
key>)`` on the JVM side, and returns Arrow record batches in the layout of :data:`OUT_FIELDS`.
The loop itself is :class:`_Runner`; nothing here imports PySpark (``process_batches`` imports
pyarrow).

The loop imports the user's topology module by name, builds the topology once per Python worker,
and for every task partition found in its input creates a :class:`streamproc.engine.task.Task`
(change-logging off: nothing is restored or written back). It hands the task whole runs of
consecutive records of one topic through :meth:`Task.process` -- the batch entry point the daemon
uses too -- so a batch costs one call, not one per record. Within a run the records keep their
order; a new run starts when the topic or the task partition changes.

A record whose key or value the source's serdes cannot deserialise (the task's source raises
:class:`~streamproc.errors.SerializationError` before anything is forwarded), or whose processing
raises :class:`~streamproc.errors.ProcessingError` (a user function failed), is *rejected*: it
yields a ``reject`` row carrying its position and the error, and processing goes on with the next
record of the run (``Task.last_count`` says which record failed, as in the daemon). A processing
error can leave the effects of the operators that ran before the failing one: there is no
rollback, as in the live daemon. A record released later from a join's buffer (a stream-table
join's grace buffer, an unmatched record of an outer stream-stream join) that fails on release is
rejected with **its own** position, timestamp, key and value bytes and source (its origin,
docs/semantics.md "Errors in records released from buffers"), not the record whose arrival
released it; that record goes on being processed.

Output rows, in the order of :data:`OUT_FIELDS`:

- ``("out", sink_topic, task_partition, seq, timestamp, key, value, dest_partition, None, None)``:
  a record a sink of the task produced; key/value as bytes, serialised exactly as the daemon does
  (the sink serde, else bytes unchanged and everything else JSON); ``seq`` numbers the task's
  outputs from 0 in production order; ``dest_partition`` is the Kafka default partitioner's
  partition (murmur2 of the key) when the topic is one of ``plan.partition_counts`` (topics a later
  stage reads, such as repartition topics), else None.
- ``("reject", topic, partition, offset, timestamp, key, value, None, error, source)``.
- ``("metrics", None, task_partition, None, None, None, None, None, json_counters, None)``: one per
  task, after its last record: ``records_in``, ``records_out``, ``rejected`` and the task's own
  ``metrics``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..engine.loading import load_topology as _load_topology
from ..engine.partitioning import partition_for, to_bytes
from ..errors import ProcessingError, SerializationError
from ..records import Record

__all__ = ["IN_FIELDS", "OUT_FIELDS", "StagePlan", "arrow_out_schema", "load_topology", "process_batches",
           "wire_bytes"]

#: Columns :func:`process_batches` reads (``source`` may be absent or null).
IN_FIELDS = ("topic", "partition", "offset", "timestamp", "key", "value", "source")
OUT_FIELDS = ("kind", "topic", "partition", "offset", "timestamp", "key", "value",
              "dest_partition", "info", "source")

_TOPOLOGIES: dict[str, Any] = {}


@dataclass(frozen=True)
class StagePlan:
    """What an executor needs to run one sub-topology (picklable, shipped with the Spark job).

    ``module``: the topology module's import name; ``partition_counts``: partition count of every
    output topic a later stage consumes (its records get a ``dest_partition``); ``sys_path``:
    directories put on the worker's ``sys.path`` before the module is imported (local mode: the
    driver's directory of the module; on a cluster the module is shipped instead, see job.py).
    """

    module: str
    application_id: str
    subtopology_id: int
    partition_counts: Mapping[str, int] = field(default_factory=dict)
    sys_path: tuple[str, ...] = ()


def load_topology(module: str, extra_path: Iterable[str] = ()) -> Any:
    """:func:`streamproc.engine.loading.load_topology` of ``MODULE[:ATTR]``, cached per process (a
    Spark Python worker builds it once)."""
    topo = _TOPOLOGIES.get(module)
    if topo is None:
        topo = _TOPOLOGIES[module] = _load_topology(module, extra_path)
    return topo


def wire_bytes(value: Any, what: str) -> bytes | None:
    """A sink output key/value as the bytes the live daemon writes (bytes unchanged, else JSON)."""
    return to_bytes(value, what)


def _metric_counts(metrics: Mapping[str, Any]) -> dict[str, int]:
    return {str(k): int(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


class _Columns:
    """Output rows gathered column by column (the layout of :data:`OUT_FIELDS`)."""

    __slots__ = ("cols",)

    def __init__(self) -> None:
        self.cols: tuple[list[Any], ...] = tuple([] for _ in OUT_FIELDS)

    def add(self, row: tuple) -> None:
        for col, v in zip(self.cols, row):
            col.append(v)

    def __len__(self) -> int:
        return len(self.cols[0])

    def take(self) -> tuple[list[Any], ...]:
        out = self.cols
        self.cols = tuple([] for _ in OUT_FIELDS)
        return out


class _Runner:
    """One Spark partition's loop: a Task per task partition, fed runs of records of one topic."""

    def __init__(self, plan: StagePlan) -> None:
        self.topology = load_topology(plan.module, plan.sys_path)
        self.plan = plan
        self.counts = dict(plan.partition_counts)
        self.task: Any = None
        self.current: int | None = None
        self.n_in = self.n_out = self.n_rejected = 0
        self.released: list[tuple[ProcessingError, Any]] = []   # the task's released_error_handler fills it
        self.sources: dict[str, Any] = {}                         # topic -> source of its rows
        self.out = _Columns()

    # -- tasks ----------------------------------------------------------------------------------
    def _start(self, partition: int) -> None:
        from ..engine.task import Task

        if self.task is not None:
            self.finish()
        self.current = partition
        self.task = Task(self.topology, self.plan.subtopology_id, partition, self.plan.application_id,
                         changelog=False)
        self.task.released_error_handler = lambda exc, origin: self.released.append((exc, origin))
        self.n_in = self.n_out = self.n_rejected = 0

    def finish(self) -> None:
        """Drain and close the current task and add its ``metrics`` row (no-op without a task)."""
        task = self.task
        if task is None:
            return
        self._drain()
        metrics = _metric_counts(getattr(task, "metrics", {}) or {})
        task.close()
        info = json.dumps({"records_in": self.n_in, "records_out": self.n_out,
                           "rejected": self.n_rejected, "metrics": metrics}, sort_keys=True)
        self.out.add(("metrics", None, self.current, None, None, None, None, None, info, None))
        self.task = None

    # -- records --------------------------------------------------------------------------------
    def _drain(self) -> None:
        outs = self.task.drain_outputs()
        if not outs:
            return
        counts = self.counts
        p = self.current
        kind, topic_c, part_c, seq_c, ts_c, key_c, value_c, dest_c, info_c, source_c = self.out.cols
        seq = self.n_out
        for out in outs:
            topic = out.topic
            key = out.key
            if key is not None and type(key) is not bytes:
                key = to_bytes(key, f"sink topic {topic!r} (key)")
            value = out.value
            if value is not None and type(value) is not bytes:
                value = to_bytes(value, f"sink topic {topic!r} (value)")
            n = counts.get(topic)
            if n is None:
                dest = None
            else:
                dest = partition_for(key, n) if key is not None else seq % n
            kind.append("out")
            topic_c.append(topic)
            part_c.append(p)
            seq_c.append(seq)
            ts_c.append(int(out.timestamp))
            key_c.append(key)
            value_c.append(value)
            dest_c.append(dest)
            info_c.append(None)
            source_c.append(None)
            seq += 1
        self.n_out = seq

    def _reject(self, exc: Exception, topic: str, partition: int, offset: int, ts: int, key: Any, value: Any,
                source: Any) -> None:
        self.n_rejected += 1
        self.out.add(("reject", topic, partition, offset, ts, None if key is None else bytes(key),
                      None if value is None else bytes(value), None, f"{type(exc).__name__}: {exc}", source))

    def _released_rejects(self) -> None:
        for exc, origin in self.released:
            self._reject(exc, origin.topic, origin.partition, origin.offset, origin.timestamp, origin.key,
                         origin.value, self.sources.get(origin.topic))
        self.released.clear()

    def run(self, topic: str, partition: int, offsets: list[int], timestamps: list[int], keys: list[Any],
            values: list[Any], source: Any) -> None:
        """Process one run: consecutive records of ``topic`` for task ``partition``, in order."""
        if partition != self.current or self.task is None:
            self._start(partition)
        self.sources[topic] = source
        records = [Record(k, v, ts, (), topic, partition, o)
                   for k, v, ts, o in zip(keys, values, timestamps, offsets)]
        task = self.task
        n = len(records)
        self.n_in += n
        start = 0
        while start < n:
            try:
                task.process(topic, partition, records[start:] if start else records)
                start = n
            except (SerializationError, ProcessingError) as exc:
                if task.last_count == 0:
                    raise  # failed before any record: not a record error
                failed = start + task.last_count - 1
                self._drain()  # what the records before it produced comes first
                self._reject(exc, topic, partition, offsets[failed], timestamps[failed], keys[failed],
                             values[failed], source)
                # outputs forwarded before a processing error are kept (no rollback), as in the daemon
                start = failed + 1
            if self.released:
                self._released_rejects()
            self._drain()

    def feed(self, topics: list[str], partitions: list[int], offsets: list[int], timestamps: list[int],
             keys: list[Any], values: list[Any], sources: list[Any]) -> None:
        """Split columns into runs (same topic, same partition, same source) and process them."""
        n = len(topics)
        i = 0
        while i < n:
            t, p, s = topics[i], partitions[i], sources[i]
            j = i + 1
            while j < n and topics[j] == t and partitions[j] == p and sources[j] == s:
                j += 1
            self.run(t, int(p), offsets[i:j], timestamps[i:j], keys[i:j], values[i:j], s)
            i = j


def arrow_out_schema() -> Any:
    """The pyarrow schema of :func:`process_batches`' output (matches job.py's Spark schema)."""
    import pyarrow as pa

    return pa.schema([
        pa.field("kind", pa.string(), nullable=False), pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()), pa.field("offset", pa.int64()), pa.field("timestamp", pa.int64()),
        pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("dest_partition", pa.int32()),
        pa.field("info", pa.string()), pa.field("source", pa.string()),
    ])


def process_batches(plan: StagePlan, batches: Iterable[Any]) -> Iterator[Any]:
    """Run the plan's sub-topology over Arrow ``batches`` (``pyarrow.RecordBatch`` with the columns
    of :data:`IN_FIELDS`, ``source`` optional), sorted by partition and then in the order each task
    must see them; yield ``pyarrow.RecordBatch``es of :func:`arrow_out_schema` (about one per input
    batch, and a last one with the final task's ``metrics`` row). See the module docstring."""
    import pyarrow as pa

    schema = arrow_out_schema()
    runner = _Runner(plan)

    def batch() -> Any:
        cols = runner.out.take()
        return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, schema)],
                                          schema=schema)

    for b in batches:
        if b.num_rows == 0:
            continue
        names = b.schema.names
        col = b.column
        sources = (col(names.index("source")).to_pylist() if "source" in names else [None] * b.num_rows)
        runner.feed(col(names.index("topic")).to_pylist(), col(names.index("partition")).to_pylist(),
                    col(names.index("offset")).to_pylist(), col(names.index("timestamp")).to_pylist(),
                    col(names.index("key")).to_pylist(), col(names.index("value")).to_pylist(), sources)
        if len(runner.out):
            yield batch()
    runner.finish()
    if len(runner.out):
        yield batch()

