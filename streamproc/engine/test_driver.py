"""TopologyTestDriver: run a topology without a broker, deterministically.

The driver builds one :class:`~streamproc.engine.task.Task` per sub-topology (partition 0) — the same
operators and change-logged stores the daemon runs — and moves records between them in memory::

    with TopologyTestDriver(topology, application_id="t") as d:
        clicks = d.input_topic("clicks")
        clicks.pipe("alice", {"page": "/"}, timestamp=1_000)
        d.output_topic("session-counts").read_records()   # [Record(key, value, timestamp), ...]
        d.session_store("session-counts")                 # the live store

Rules:

- ``pipe`` processes the record at once, then every record it caused on repartition topics (and on
  output topics the topology also reads), in production order, until nothing is left.
- Serdes: with none configured records pass through as Python objects (windowed keys come out as
  :class:`~streamproc.records.Windowed`); configured serdes are exercised as a bytes round trip
  (input serialised with the source's serdes, output deserialised with the sink's).
- Output topics are queues: reading consumes. Records are captured from the start, whether or not
  ``output_topic()`` was called yet.
- After each piped record the change-logged stores are drained into :meth:`changelog` (in order), so a
  test can replay them into a fresh driver with ``TopologyTestDriver(..., changelogs=...)``. Like a
  changelog topic, a store's changelog holds the records replayed at start first, then the new ones,
  so restarts chain: ``TopologyTestDriver(t, changelogs=previous.changelogs())`` again and again.
- Piping into a topic the topology does not read is a ``ValueError`` naming it and listing the topics.
- Errors in records released from buffers (docs/semantics.md): ``released_error_policy`` chooses,
  like the daemon's error policy, what happens when processing a record released later from a
  join's buffer raises: ``"fail"`` (default) raises the ``ProcessingError`` from ``pipe``, naming
  the released record's position; ``"skip"`` logs it once and goes on; ``"dead-letter"`` also writes
  the released record (its key and value as piped, its headers plus the ``streamproc.error.*``
  headers) to the output topic ``<application_id>-dlq``. Both record every such error in
  :attr:`TopologyTestDriver.released_errors` as ``(ProcessingError, Origin)``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Self

from ..dsl.options import check_serde
from ..dsl.topology import Topology
from ..errors import ProcessingError
from ..records import KeyValue, Record
from ..serde import Serde
from ..time import Duration, duration_ms
from .error_policy import ErrorPolicy, Stage, dead_letter_headers
from .task import Task
from .task_records import OutputRecord

log = logging.getLogger("streamproc.test_driver")

__all__ = ["TestInputTopic", "TestOutputTopic", "TopologyTestDriver"]


#: What a :class:`TestInputTopic` hands each record to (the driver's entry point):
#: ``pipe(topic, key, value, timestamp, headers, key_serde, value_serde)``.
PipeRecord = Callable[[str, Any, Any, int, tuple, Serde | None, Serde | None], None]


class TestInputTopic:
    """Pipes records into one input topic of a :class:`TopologyTestDriver`.

    A record without an explicit timestamp gets the topic's current time, which starts at
    ``start_timestamp`` (default: the driver's wall clock) and advances by ``auto_advance`` per record.
    Created by :meth:`TopologyTestDriver.input_topic`, which passes its record entry point as ``pipe``.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, pipe: PipeRecord, name: str, key_serde: Serde | None,
                 value_serde: Serde | None, start_timestamp: int, auto_advance: int) -> None:
        self._pipe = pipe
        self.name = name
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._time = start_timestamp
        self._advance = auto_advance

    def _timestamp(self, timestamp: int | None) -> int:
        if timestamp is None:
            timestamp = self._time
            self._time += self._advance
        elif isinstance(timestamp, bool) or not isinstance(timestamp, int):
            raise ValueError(f"timestamp of a record piped into {self.name!r} must be int milliseconds, "
                             f"got {type(timestamp).__name__} {timestamp!r}")
        return timestamp

    def advance_time(self, ms: Duration) -> None:
        """Move the topic's current time forward (for records piped without a timestamp)."""
        self._time += duration_ms(ms, "advance", f"input topic {self.name!r}")

    def pipe(self, key: Any, value: Any, timestamp: int | None = None,
             headers: Iterable[tuple[str, bytes]] = ()) -> None:
        """Process one record ``(key, value, timestamp)`` and everything it causes."""
        self._pipe(self.name, key, value, self._timestamp(timestamp), tuple(headers),
                   self._key_serde, self._value_serde)

    def pipe_value(self, value: Any, timestamp: int | None = None) -> None:
        """``pipe(None, value, timestamp)``."""
        self.pipe(None, value, timestamp)

    def pipe_records(self, records: Iterable[Any]) -> None:
        """Pipe each of ``records``: :class:`Record` objects or ``(key, value[, timestamp])`` tuples."""
        for item in records:
            if isinstance(item, Record):
                self.pipe(item.key, item.value, item.timestamp, item.headers)
            else:
                fields = tuple(item)
                if len(fields) == 2:
                    self.pipe(fields[0], fields[1])
                elif len(fields) == 3:
                    self.pipe(fields[0], fields[1], fields[2])
                else:
                    raise ValueError(f"records piped into {self.name!r} must be Record or (key, value[, timestamp]), "
                                     f"got {item!r}")

    pipe_list = pipe_records

    def pipe_key_values(self, pairs: Iterable[tuple[Any, Any]], timestamp: int | None = None,
                        advance: int = 0) -> None:
        """Pipe ``(key, value)`` pairs at ``timestamp``, ``timestamp + advance``, ..."""
        ts = timestamp
        for key, value in pairs:
            self.pipe(key, value, ts)
            if ts is not None:
                ts += advance

    def __repr__(self) -> str:
        return f"TestInputTopic({self.name!r})"


class TestOutputTopic:
    """Reads what the topology wrote to one topic. A queue: every read consumes."""

    __test__ = False

    def __init__(self, driver: TopologyTestDriver, name: str, queue: deque) -> None:
        self._driver = driver
        self.name = name
        self._queue = queue

    def _pop(self) -> Record:
        if not self._queue:
            raise IndexError(f"output topic {self.name!r} is empty")
        return self._queue.popleft()

    def read_record(self) -> Record:
        """The oldest unread record (IndexError when there is none)."""
        return self._pop()

    def read_records(self) -> list[Record]:
        """All unread records, oldest first: ``[Record(key, value, timestamp), ...]``."""
        out = list(self._queue)
        self._queue.clear()
        return out

    read_records_to_list = read_records

    def read_key_value(self) -> KeyValue:
        r = self._pop()
        return KeyValue(r.key, r.value)

    def read_key_values(self) -> list[KeyValue]:
        return [KeyValue(r.key, r.value) for r in self.read_records()]

    read_key_values_to_list = read_key_values

    def read_key_values_to_map(self) -> dict[Any, Any]:
        """Unread records folded into ``{key: latest value}`` (a ``None`` value removes the key)."""
        out: dict[Any, Any] = {}
        for r in self.read_records():
            if r.value is None:
                out.pop(r.key, None)
            else:
                out[r.key] = r.value
        return out

    def read_value(self) -> Any:
        return self._pop().value

    def read_values(self) -> list[Any]:
        return [r.value for r in self.read_records()]

    read_values_to_list = read_values

    def is_empty(self) -> bool:
        return not self._queue

    def queue_size(self) -> int:
        return len(self._queue)

    def __len__(self) -> int:
        return len(self._queue)

    def __repr__(self) -> str:
        return f"TestOutputTopic({self.name!r}, unread={len(self._queue)})"


class TopologyTestDriver:
    """Runs ``topology`` broker-less: one task per sub-topology, partition 0.

    ``changelogs``: ``{store name or changelog topic: [ChangelogRecord, ...]}`` replayed into the stores
    before any record (what the daemon does on assignment). ``initial_wall_clock_ms``: the wall clock.
    ``released_error_policy``: ``"fail"`` (default), ``"skip"`` or ``"dead-letter"`` for errors in
    records released from buffers (module docstring).
    """

    def __init__(self, topology: Topology, application_id: str = "t", *, initial_wall_clock_ms: int = 0,
                 changelogs: Mapping[str, Iterable[Any]] | None = None, changelog: bool = True,
                 released_error_policy: str = "fail") -> None:
        if not isinstance(topology, Topology):
            raise ValueError(f"TopologyTestDriver needs a Topology (StreamsBuilder.build()), "
                             f"got {type(topology).__name__} {topology!r}")
        try:
            self.released_error_policy = ErrorPolicy(released_error_policy)
        except ValueError:
            raise ValueError(f"released_error_policy must be one of {[p.value for p in ErrorPolicy]}, "
                             f"got {released_error_policy!r}") from None
        #: ``(ProcessingError, Origin)`` of every released record that failed (policies skip, dead-letter)
        self.released_errors: list[tuple[ProcessingError, Any]] = []
        self.dead_letter_topic = f"{application_id}-dlq"
        self.topology = topology
        self.application_id = application_id
        self._wall_clock = int(initial_wall_clock_ms)
        subs = topology.subtopologies_for(application_id)
        self.tasks: list[Task] = [Task(topology, s.id, 0, application_id, changelog=changelog) for s in subs]
        self._consumers: dict[str, list[Task]] = {}
        for task in self.tasks:
            for topic in task.source_topics:
                self._consumers.setdefault(topic, []).append(task)
        self._internal: set[str] = set()
        for s in subs:
            self._internal |= set(s.repartition_topics)
        self._outputs: dict[str, deque] = {t: deque() for t in topology.sink_topics(application_id)
                                           if t not in self._internal}
        self._sink_serdes = {t: topology.sink_serdes(t, application_id) for t in self._outputs}
        if self.released_error_policy is not ErrorPolicy.FAIL:
            for task in self.tasks:
                task.released_error_handler = self._released_error
            if self.released_error_policy is ErrorPolicy.DEAD_LETTER:
                self._outputs[self.dead_letter_topic] = deque()
                self._sink_serdes[self.dead_letter_topic] = (None, None)
        self._offsets: dict[str, int] = {}
        self._store_task: dict[str, Task] = {}
        self._changelogs: dict[str, list[Any]] = {}
        for task in self.tasks:
            for name in task.stores:
                self._store_task[name] = task
            for name in task.changelog_topics:
                self._changelogs[name] = []
        if changelogs:
            for name, records in changelogs.items():
                self._restore(name, records)
        self._closed = False

    # -- context manager --------------------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every task (and its stores)."""
        if not self._closed:
            self._closed = True
            for task in self.tasks:
                task.close()

    # -- topics -----------------------------------------------------------------------------
    def input_topics(self) -> list[str]:
        """The topics records can be piped into (the topology's non-internal sources)."""
        return sorted(t for t in self._consumers if t not in self._internal)

    def output_topics(self) -> list[str]:
        return sorted(self._outputs)

    def input_topic(self, name: str, key_serde: Any = None, value_serde: Any = None,
                    start_timestamp: int | None = None, auto_advance: Duration = 0) -> TestInputTopic:
        """An input topic. ``key_serde``/``value_serde`` override the source's serdes for piping."""
        return TestInputTopic(self._pipe, name, check_serde(key_serde, "key_serde", f"input_topic({name!r})"),
                              check_serde(value_serde, "value_serde", f"input_topic({name!r})"),
                              self._wall_clock if start_timestamp is None else int(start_timestamp),
                              duration_ms(auto_advance, "auto_advance", f"input topic {name!r}"))

    def output_topic(self, name: str) -> TestOutputTopic:
        """The records written to ``name`` (a sink topic of the topology)."""
        if name not in self._outputs:
            raise ValueError(f"topic {name!r} is not an output of this topology; output topics: "
                             f"{self.output_topics()}")
        return TestOutputTopic(self, name, self._outputs[name])

    # -- processing -------------------------------------------------------------------------
    def _next_offset(self, topic: str) -> int:
        offset = self._offsets.get(topic, 0)
        self._offsets[topic] = offset + 1
        return offset

    def _pipe(self, topic: str, key: Any, value: Any, timestamp: int, headers: tuple,
              key_serde: Serde | None, value_serde: Serde | None) -> None:
        if self._closed:
            raise ValueError("the TopologyTestDriver is closed")
        if topic not in self._consumers or topic in self._internal:
            raise ValueError(f"cannot pipe into topic {topic!r}: the topology does not read it; "
                             f"input topics: {self.input_topics()}")
        src_ks, src_vs = self.topology.source_serdes(topic, self.application_id)
        ks = key_serde or src_ks
        vs = value_serde or src_vs
        where = f"input topic {topic!r}"
        if ks is not None:
            key = ks.serialize(key, where)
        if vs is not None:
            value = vs.serialize(value, where)
        pending: deque = deque()
        pending.append(Record(key, value, timestamp, headers, topic, 0, self._next_offset(topic)))
        while pending:
            record = pending.popleft()
            for task in self._consumers.get(record.topic, ()):
                task.process(record.topic, 0, [record])
                self._collect(task, pending)

    def _collect(self, task: Task, pending: deque) -> None:
        for out in task.drain_outputs():
            self._route(out, pending)
        for topic_records in task.drain_changelogs().items():
            self._log_changelog(task, *topic_records)

    def _log_changelog(self, task: Task, topic: str, records: list[Any]) -> None:
        by_topic = {t: s for s, t in task.changelog_topics.items()}
        self._changelogs[by_topic[topic]].extend(records)

    def _route(self, out: OutputRecord, pending: deque) -> None:
        topic = out.topic
        offset = self._next_offset(topic)
        if topic in self._consumers:
            pending.append(Record(out.key, out.value, out.timestamp, out.headers, topic, 0, offset))
        queue = self._outputs.get(topic)
        if queue is not None:
            ks, vs = self._sink_serdes[topic]
            where = f"output topic {topic!r}"
            key = ks.deserialize(out.key, where) if ks is not None else out.key
            value = vs.deserialize(out.value, where) if vs is not None else out.value
            queue.append(Record(key, value, out.timestamp, out.headers, topic, 0, offset))

    def _released_error(self, exc: ProcessingError, origin: Any) -> None:
        """A task's ``released_error_handler``: apply :attr:`released_error_policy` to ``origin``."""
        self.released_errors.append((exc, origin))
        if self.released_error_policy is ErrorPolicy.SKIP:
            log.warning("skipping a record released from a buffer: %s", exc)
            return
        headers = dead_letter_headers(origin.headers, exc, Stage.PROCESSING, origin.topic or "",
                                      -1 if origin.partition is None else origin.partition,
                                      -1 if origin.offset is None else origin.offset)
        topic = self.dead_letter_topic
        self._outputs[topic].append(Record(origin.key, origin.value, origin.timestamp, tuple(headers), topic, 0,
                                           self._next_offset(topic)))

    def advance_wall_clock(self, ms: Duration) -> None:
        """Move the wall clock forward by ``ms`` and run wall-clock punctuation."""
        self._wall_clock += duration_ms(ms, "advance", "advance_wall_clock")
        pending: deque = deque()
        for task in self.tasks:
            task.punctuate_wall_clock(self._wall_clock)
            self._collect(task, pending)
        while pending:
            record = pending.popleft()
            for task in self._consumers.get(record.topic, ()):
                task.process(record.topic, 0, [record])
                self._collect(task, pending)

    @property
    def wall_clock_ms(self) -> int:
        return self._wall_clock

    # -- stores -----------------------------------------------------------------------------
    def _store(self, name: str, kind: str | None) -> Any:
        task = self._store_task.get(name)
        if task is None:
            raise ValueError(f"the topology has no store {name!r}; stores: {sorted(self._store_task)}")
        store = task.stores[name]
        if kind is not None and store.kind != kind:
            raise ValueError(f"store {name!r} is a {store.kind.replace('_', '-')} store, "
                             f"not a {kind.replace('_', '-')} store")
        return store

    def state_store(self, name: str) -> Any:
        """The live store ``name`` (its change-logging wrapper when change-logged)."""
        return self._store(name, None)

    def session_store(self, name: str) -> Any:
        return self._store(name, "session")

    def versioned_store(self, name: str) -> Any:
        return self._store(name, "versioned")

    def key_value_store(self, name: str) -> Any:
        return self._store(name, "key_value")

    def window_store(self, name: str) -> Any:
        return self._store(name, "window")

    def state_stores(self) -> dict[str, Any]:
        return {name: task.stores[name] for name, task in self._store_task.items()}

    # -- changelogs ---------------------------------------------------------------------------
    def _restore(self, name: str, records: Iterable[Any]) -> None:
        for task in self.tasks:
            if name in task.changelog_topics or name in task.changelog_topics.values():
                replayed = list(records)
                task.restore(name, replayed)
                store = name if name in task.changelog_topics else next(
                    s for s, t in task.changelog_topics.items() if t == name)
                self._changelogs[store][:0] = replayed  # the topic keeps what was replayed
                return
        raise ValueError(f"cannot restore {name!r}: no change-logged store or changelog topic of that name; "
                         f"stores: {sorted(self._changelogs)}")

    def changelog(self, store: str) -> list[Any]:
        """Every record of the changelog of ``store`` (a store name or changelog topic), in order: those
        replayed into it at start, then those it produced."""
        if store not in self._changelogs:
            for task in self.tasks:
                for name, topic in task.changelog_topics.items():
                    if topic == store:
                        return list(self._changelogs[name])
            raise ValueError(f"no change-logged store {store!r}; stores: {sorted(self._changelogs)}")
        return list(self._changelogs[store])

    def changelogs(self) -> dict[str, list[Any]]:
        """``{store name: [ChangelogRecord, ...]}`` for every change-logged store."""
        return {name: list(records) for name, records in self._changelogs.items()}

    # -- metrics ----------------------------------------------------------------------------
    @property
    def metrics(self) -> dict[str, int]:
        """Task metrics summed over the driver's tasks (``records_in``, ``dropped_records``, ...)."""
        total: dict[str, int] = {}
        for task in self.tasks:
            for key, value in task.metrics.items():
                total[key] = total.get(key, 0) + value
        return total

    def metrics_by_operator(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for task in self.tasks:
            out.update(task.metrics_by_operator())
        return out
