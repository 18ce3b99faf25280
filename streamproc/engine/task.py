"""Task: one partition of one sub-topology — its stores and processor graph.

The daemon and the :class:`~streamproc.engine.test_driver.TopologyTestDriver` run the same class::

    task = Task(topology, subtopology_id=0, partition=3, application_id="sessions")
    task.stores["session-counts"].restore(changelog_records)   # before the first record
    task.process("clicks", 3, records)      # objects with .key .value .timestamp .headers .offset
    outputs = task.drain_outputs()          # [OutputRecord(topic, key, value, timestamp, headers)]
    changelog = {name: store.drain() for name, store in task.stores.items()}

Contract:

- ``task.stores``: ``{store name: store}``; each store is wrapped by
  :func:`streamproc.stores.change_logged` (topic ``<application_id>-<store>-changelog``) unless
  ``changelog=False`` or the store was built with logging disabled.
- ``process(topic, partition, records)`` runs the processor graph synchronously over the batch,
  then lets processors write their in-memory progress markers to their stores (``flush``), so
  draining the changelogs between batches captures a consistent state.
  Keys and values are deserialised by the source's serdes (bytes and objects pass through when it
  has none). Processors are initialised at the first ``process``/``punctuate_wall_clock`` call, so
  stores must be restored before that: processors read their progress (stream time, emit and
  buffer progress) from the restored stores.
- A user function that raises propagates as :class:`~streamproc.errors.ProcessingError` with
  ``key``, ``topic``, ``partition``, ``offset`` and ``operator`` set; a source serde failure as
  :class:`~streamproc.errors.SerializationError` naming the record's position.
- Errors in records released from buffers (docs/semantics.md, "Errors in records released from
  buffers"): a record an operator keeps and acts on later (a stream-table join's grace buffer, an
  outer stream-stream join's unmatched record emitted with a ``None`` partner) keeps its origin
  (:class:`~streamproc.processors.origin.Origin`: ``topic``, ``partition``, ``offset``,
  ``timestamp``, ``key`` and ``value`` as fetched, ``headers``). When processing it on release
  raises a ``ProcessingError``, the error's ``topic``/``partition``/``offset`` are the origin's.
  ``released_error_handler`` (``Callable[[ProcessingError, Origin], None] | None``, default None):
  when set, the operator calls it with the error and the origin and goes on with the record being
  processed (the released record is consumed: removed from the buffer, nothing forwarded for it);
  the handler applies the error policy to the origin (e.g. dead-letters ``origin.key`` /
  ``origin.value``) and must not raise unless the whole batch is to fail. When None, the error
  propagates out of ``process`` (naming the origin's position, not the record being processed).
- ``drain_outputs()`` returns and clears the records the sinks produced: key/value serialised to
  bytes by the sink's serdes when it has them, else the topology's Python objects.
- ``metrics``: ``records_in``, ``records_out``, ``dropped_records`` (total) and
  ``dropped_records_<reason>`` (``late``, ``null_key``, ``null_value``, ``store`` = puts the stores
  rejected as expired).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..dsl.topology import SubTopology, Topology
from ..errors import ProcessingError
from ..processors.base import Processor
from ..processors.source_sink import SourceProcessor
from .task_records import NO_HEADERS, OutputRecord, TaskId

__all__ = ["OutputRecord", "Task", "TaskId"]


class _NoRecord:
    """``task.current`` outside ``process`` (wall-clock punctuation)."""

    __slots__ = ()
    key = value = offset = topic = partition = None
    timestamp = -1
    headers = NO_HEADERS


_NO_RECORD = _NoRecord()


class Task:
    """The processor graph and stores of one sub-topology partition."""

    def __init__(self, topology: Topology, subtopology_id: int, partition: int, application_id: str,
                 changelog: bool = True, stores: Mapping[str, Any] | None = None) -> None:
        """``stores``: the stores of a previous task of the same id (:meth:`release_stores`), kept
        with their contents instead of new empty ones."""
        if not isinstance(topology, Topology):
            raise ValueError(f"Task needs a Topology (StreamsBuilder.build()), got {type(topology).__name__}")
        if not isinstance(application_id, str) or not application_id:
            raise ValueError(f"application_id must be a non-empty str, got {application_id!r}")
        self.topology = topology
        self.application_id = application_id
        self.partition = partition
        self.id = TaskId(subtopology_id, partition)
        self.subtopology: SubTopology = topology.subtopologies_for(application_id)[subtopology_id]
        nodes = topology.subtopology_nodes(subtopology_id)

        self.stores: dict[str, Any] = {}
        self.changelog_topics: dict[str, str] = {}
        for spec in self.subtopology.stores:
            if stores is not None:
                self.stores[spec.name] = stores[spec.name]
                if changelog and spec.logging:
                    self.changelog_topics[spec.name] = spec.changelog_topic(application_id)
                continue
            store = spec.create()
            if changelog and spec.logging:
                from ..stores import change_logged

                topic = spec.changelog_topic(application_id)
                store = change_logged(store, spec.key_serde, spec.value_serde, topic=topic)
                self.changelog_topics[spec.name] = topic
            self.stores[spec.name] = store

        self.processors: dict[str, Processor] = {n.name: n.make() for n in nodes}
        for node in nodes:
            self.processors[node.name].children = [self.processors[c.name] for c in node.children]
        self._sources: dict[str, SourceProcessor] = {}
        for node in nodes:
            proc = self.processors[node.name]
            if isinstance(proc, SourceProcessor):
                for topic in proc.resolved_topics(application_id):
                    self._sources[topic] = proc
        self._order = [self.processors[n.name] for n in nodes]
        self._flushers = [p for p in self._order if p.needs_flush]
        self.outputs: list[OutputRecord] = []
        self.current: Any = _NO_RECORD
        #: called with ``(ProcessingError, Origin)`` for a record released from a buffer that failed
        #: (see the module docstring); None: such an error propagates out of ``process``
        self.released_error_handler: Callable[[ProcessingError, Any], None] | None = None
        self._initialized = False
        self._closed = False
        self._records_in = 0
        #: records of the last ``process`` call handed to the graph (the failing one included)
        self.last_count = 0
        self._records_out = 0

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def source_topics(self) -> frozenset[str]:
        return frozenset(self._sources)

    def initialize(self) -> None:
        """Initialise the processors (reads restored progress from the stores). Idempotent; called
        by the first ``process``/``punctuate_wall_clock``."""
        if self._initialized:
            return
        if self._closed:
            raise ValueError(f"task {self.id} is closed")
        for proc in reversed(self._order):  # children first: parents bind their children's methods
            proc.init(self)
        self._initialized = True

    def restore(self, store: str, records: Iterable[Any]) -> None:
        """Replay changelog ``records`` (``ChangelogRecord``) into ``store`` (a store or changelog
        topic name). Only before the first record is processed."""
        if self._initialized:
            raise ValueError(f"task {self.id}: restore {store!r} before processing any record")
        name = store
        if name not in self.stores:
            by_topic = {t: s for s, t in self.changelog_topics.items()}
            if name not in by_topic:
                raise ValueError(f"task {self.id} has no change-logged store or changelog topic {store!r}; "
                                 f"stores: {sorted(self.changelog_topics)}")
            name = by_topic[name]
        target = self.stores[name]
        if not hasattr(target, "restore"):
            raise ValueError(f"store {name!r} of task {self.id} is not change-logged")
        target.restore(records)

    def close(self) -> None:
        """Close processors and stores; the task cannot be used afterwards."""
        if self._closed:
            return
        self._closed = True
        for proc in self._order:
            proc.close()
        for store in self.stores.values():
            store.close()

    def release_stores(self) -> dict[str, Any]:
        """Close the processors but not the stores, and hand the stores over (with their contents)
        to a new task of the same id (``Task(..., stores=...)``): how a task is suspended and resumed
        without rebuilding its state. This task cannot be used afterwards."""
        if self._closed:
            raise ValueError(f"task {self.id} is closed")
        self._closed = True
        for proc in self._order:
            proc.close()
        return dict(self.stores)

    # -- processing -----------------------------------------------------------------------------
    def process(self, topic: str, partition: int, records: Iterable[Any]) -> None:
        """Run the graph over ``records`` of ``topic``/``partition`` (synchronously, in order).

        Afterwards, also when it raises, :attr:`last_count` is how many records were handed to the
        graph (so ``records[last_count - 1]`` is the one that failed)."""
        self.last_count = 0
        source = self._sources.get(topic)
        if source is None:
            raise ValueError(f"task {self.id} does not read topic {topic!r}; its topics: {sorted(self._sources)}")
        if not self._initialized:
            self.initialize()
        receive = source.receive
        record: Any = None
        count = 0
        try:
            for record in records:
                count += 1
                self.current = record
                receive(record)
            for proc in self._flushers:
                proc.flush()
        except ProcessingError as exc:
            self._locate(exc, topic, partition, record)
            raise
        finally:
            self._records_in += count
            self.last_count = count
            self.current = _NO_RECORD

    @staticmethod
    def _locate(exc: ProcessingError, topic: str, partition: int, record: Any) -> None:
        if exc.topic is not None:
            return
        exc.topic = topic
        exc.partition = partition
        exc.offset = getattr(record, "offset", None)
        if exc.args:
            exc.args = (f"{exc.args[0]} at {topic}[{partition}]@{exc.offset}",) + exc.args[1:]

    def punctuate_wall_clock(self, now_ms: int) -> None:
        """Wall-clock driven work of the processors (none of the built-in operators needs any)."""
        if not self._initialized:
            self.initialize()
        for proc in self._order:
            proc.punctuate_wall_clock(now_ms)
        for proc in self._flushers:
            proc.flush()

    def drain_outputs(self) -> list[OutputRecord]:
        """The records produced since the last call (and forget them)."""
        if not self.outputs:
            return []
        out = list(self.outputs)
        self.outputs.clear()
        self._records_out += len(out)
        return out

    def drain_changelogs(self) -> dict[str, list[Any]]:
        """``{changelog topic: [ChangelogRecord, ...]}`` pending in the change-logged stores."""
        out = {}
        for name, topic in self.changelog_topics.items():
            records = self.stores[name].drain()
            if records:
                out[topic] = records
        return out

    # -- metrics --------------------------------------------------------------------------------
    def metrics_by_operator(self) -> dict[str, dict[str, int]]:
        return {p.name: m for p in self._order if (m := p.metrics())}

    @property
    def metrics(self) -> dict[str, int]:
        m: dict[str, int] = {"records_in": self._records_in, "records_out": self._records_out + len(self.outputs)}
        dropped = 0
        for proc in self._order:
            for key, value in proc.metrics().items():
                m[key] = m.get(key, 0) + value
                if key.startswith("dropped_records"):
                    dropped += value
        store_drops = sum(getattr(getattr(s, "inner", s), "dropped_records", 0) for s in self.stores.values())
        m["dropped_records_store"] = store_drops
        m["dropped_records"] = dropped + store_drops
        return m

    def dropped_by_operator(self) -> dict[tuple[str, str], int]:
        """``{(operator, reason): records dropped so far}``: every processor's
        ``dropped_records_<reason>`` counters, and per store the writes it rejected as expired
        (operator = the store's name, reason ``store``)."""
        out: dict[tuple[str, str], int] = {}
        for proc in self._order:
            for key, value in proc.metrics().items():
                if key.startswith("dropped_records_"):
                    out[(proc.name, key[len("dropped_records_"):])] = value
        for name, store in self.stores.items():
            rejected = getattr(getattr(store, "inner", store), "dropped_records", 0)
            if rejected:
                out[(name, "store")] = rejected
        return out

    def late_example(self, operator: str) -> tuple[Any, Any, Any, int, int] | None:
        """The last record ``operator`` dropped as late: ``(topic, partition, offset, timestamp,
        stream time)``, or None."""
        proc = self.processors.get(operator)
        return None if proc is None else proc.late_example

    def __repr__(self) -> str:
        return f"Task({self.id}, topics={sorted(self._sources)}, stores={sorted(self.stores)})"


def restore_all(task: Task, changelogs: Mapping[str, Iterable[Any]]) -> None:
    """Restore several stores of ``task``: ``{store or changelog topic: records}``."""
    for name, records in changelogs.items():
        task.restore(name, records)
