"""The executor side of reprocessing: run one sub-topology's tasks over ordered input rows.

This module is pure Python (no Spark import): :func:`process_rows` is what every Spark partition
runs, and what the unit tests run directly. It imports the user's topology module by name, builds
the topology once per Python worker, and for every task partition found in its input creates a
:class:`streamproc.engine.task.Task` (change-logging off: nothing is restored or written back)
and feeds it the rows one by one, in the order they arrive. The caller (the Spark job) sorts the
rows by ``(partition, <order key>)`` so each task partition's rows are contiguous and ordered.

A record whose key or value the source's serdes cannot deserialise (the task's source raises
:class:`~streamproc.errors.SerializationError` before anything is forwarded), or whose processing raises :class:`~streamproc.errors.ProcessingError`
(a user function failed), is *rejected*: it yields a ``reject`` row carrying its position and the
error, and processing goes on with the next record. (A processing error can leave the effects of
the operators that ran before the failing one: there is no rollback, as in the live daemon.)
A record released later from a join's buffer (a stream-table join's grace buffer, an unmatched
record of an outer stream-stream join) that fails on release is rejected with **its own** position,
timestamp, key and value bytes and source (its origin, docs/semantics.md "Errors in records released
from buffers"), not the record whose arrival released it; that record goes on being processed.

Yielded rows are plain tuples in the order of :data:`OUT_FIELDS`:

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
from ..errors import ProcessingError, SerializationError
from ..records import Record

__all__ = ["OUT_FIELDS", "StagePlan", "load_topology", "process_rows", "wire_bytes"]

OUT_FIELDS = ("kind", "topic", "partition", "offset", "timestamp", "key", "value",
              "dest_partition", "info", "source")

_TOPOLOGIES: dict[str, Any] = {}


@dataclass(frozen=True)
class StagePlan:
    """What an executor needs to run one sub-topology (picklable, shipped with the Spark job).

    ``module``: the topology module's import name; ``partition_counts``: partition count of every
    output topic a later stage consumes (its records get a ``dest_partition``).
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
    from ..engine.partitioning import to_bytes

    return to_bytes(value, what)


def _make_task(topology: Any, plan: StagePlan, partition: int) -> Any:
    from ..engine.task import Task

    return Task(topology, plan.subtopology_id, partition, plan.application_id, changelog=False)


def _metric_counts(metrics: Mapping[str, Any]) -> dict[str, int]:
    return {str(k): int(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def process_rows(plan: StagePlan, rows: Iterable[Any]) -> Iterator[tuple]:
    """Run the plan's sub-topology over ``rows`` (see the module docstring for the contract).

    ``rows`` are objects with ``topic, partition, offset, timestamp, key, value`` attributes and
    optionally ``source`` (Spark ``Row``s, or any namedtuple), sorted by partition and then in the
    order each task must see them.
    """
    topology = load_topology(plan.module, plan.sys_path)
    counts = dict(plan.partition_counts)
    task = None
    current = None
    state: dict[str, int] = {}
    released: list[tuple[ProcessingError, Any]] = []    # the task's released_error_handler fills it
    sources: dict[str, Any] = {}                          # topic -> source of its rows

    def released_rejects() -> Iterator[tuple]:
        for exc, origin in released:
            state["rejected"] += 1
            key = None if origin.key is None else bytes(origin.key)
            value = None if origin.value is None else bytes(origin.value)
            yield ("reject", origin.topic, origin.partition, origin.offset, origin.timestamp, key, value, None,
                   f"{type(exc).__name__}: {exc}", sources.get(origin.topic))
        released.clear()

    def finish() -> Iterator[tuple]:
        nonlocal task
        assert task is not None
        yield from drain()
        metrics = _metric_counts(getattr(task, "metrics", {}) or {})
        task.close()
        info = json.dumps({"records_in": state["in"], "records_out": state["out"],
                           "rejected": state["rejected"], "metrics": metrics}, sort_keys=True)
        yield ("metrics", None, current, None, None, None, None, None, info, None)
        task = None

    def drain() -> Iterator[tuple]:
        assert task is not None
        for out in task.drain_outputs():
            topic = out.topic
            where = f"sink topic {topic!r}"
            key = wire_bytes(out.key, where + " (key)")
            value = wire_bytes(out.value, where + " (value)")
            n = counts.get(topic)
            dest = None
            if n is not None:
                from ..engine.partitioning import partition_for

                dest = partition_for(key, n) if key is not None else state["out"] % n
            yield ("out", topic, current, state["out"], int(out.timestamp), key, value, dest, None, None)
            state["out"] += 1

    for row in rows:
        partition = int(row.partition)
        if partition != current:
            if task is not None:
                yield from finish()
            current = partition
            task = _make_task(topology, plan, partition)
            task.released_error_handler = lambda exc, origin: released.append((exc, origin))
            state = {"in": 0, "out": 0, "rejected": 0}
        topic, offset, ts = row.topic, int(row.offset), int(row.timestamp)
        key = None if row.key is None else bytes(row.key)
        value = None if row.value is None else bytes(row.value)
        state["in"] += 1
        sources[topic] = getattr(row, "source", None)
        assert task is not None
        try:
            task.process(topic, partition, [Record(key, value, ts, (), topic, partition, offset)])
        except (SerializationError, ProcessingError) as exc:
            state["rejected"] += 1
            source = getattr(row, "source", None)
            yield ("reject", topic, partition, offset, ts, key, value, None,
                   f"{type(exc).__name__}: {exc}", source)
            # outputs forwarded before a processing error are kept (no rollback), as in the daemon
        if released:
            yield from released_rejects()
        yield from drain()
    if task is not None:
        yield from finish()
