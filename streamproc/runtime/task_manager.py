"""The daemon's tasks over their lifetime: created on assignment, restored, fed in timestamp order,
failed and restarted, closed on revocation.

A :class:`TaskManager` owns every :class:`~streamproc.runtime.tasks.ManagedTask` of one app:

* **assignment** (:meth:`assign`): one task per sub-topology partition, its input paused while
  the :class:`~streamproc.runtime.restore.Restorer` rebuilds its stores from their changelogs,
  then resumed (the task is *running*);
* **input** (:meth:`buffer`, :meth:`process_ready`): fetched records go to the task's
  :class:`~streamproc.runtime.partition_group.PartitionGroup` and are processed in the order it
  releases them (timestamp order across the task's partitions, docs/semantics.md); a partition
  whose buffer is full is paused on the consumer and resumed once below the bound;
* **failure** (:meth:`fail`, :meth:`fail_running`, :meth:`restart_failed`): a task whose send
  failed or was not acknowledged in time is closed, its input rewound to its last committed offset
  and recreated (with a restore);
* **revocation** (:meth:`revoke`): a running task whose offsets were just committed is
  *suspended*: its processors are closed, its stores kept in memory with the changelog end offsets
  read then. Assigned again (or as a standby) within ``suspended_task_retention_ms``, it restores
  only the changelog records written since; not, it is closed. Buffered input is forgotten either
  way (it is fetched again from the committed offsets by whoever owns the partitions next);
* **standbys** (:meth:`assign` with ``standby``): a standby task's stores follow its changelogs
  (:meth:`Restorer.follow <streamproc.runtime.restore.Restorer.follow>`); made active, it restores
  only the tail;
* **shutdown** (:meth:`close_all`).

It knows the consumer only through the calls below (aiokafka's ``AIOKafkaConsumer``): ``pause``,
``resume``, ``seek``, ``seek_to_beginning``, ``seek_to_end``, ``committed``, ``position``,
``highwater``, ``last_stable_offset``, ``assignment``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition

from ..config import Config
from ..engine.error_policy import RecordError
from ..engine.task import Task, TaskId
from .acks import InputProgress
from .assignor import LocalState
from .drops import DropReporter
from .metrics import Metrics
from .partition_group import PartitionGroup
from .producer import SendBuffer
from .restore import Restorer
from .tasks import ManagedTask, TaskRegistry, TaskState, group_by_task

__all__ = ["RecordErrorHandler", "Round", "TaskManager"]

log = logging.getLogger("streamproc.tasks")

#: ``(error, input partition, record, send buffer, released)``: route a record that failed (error
#: policies); ``released``: the record is a join buffer's origin released while ``tp`` was processed.
RecordErrorHandler = Callable[[Exception, TopicPartition, Any, SendBuffer, bool], None]

#: Event time released per pass when tasks are aligned (:meth:`TaskManager.process_ready`), ms.
ALIGN_SLICE_MS = 1_000
#: How long a revocation waits for the changelogs' end offsets before closing the tasks instead of
#: keeping them (brokers away: the rebalance must not wait for them).
END_OFFSETS_TIMEOUT_S = 3.0
#: Seconds between two "waited max_task_idle_ms" warnings of one task.
ENFORCED_LOG_INTERVAL_S = 60.0


def now_ms() -> int:
    """The clock of the input buffers' wait bound (monotonic ms)."""
    return int(time.monotonic() * 1000)


@dataclass
class Round:
    """What one :meth:`TaskManager.process_ready` call processed: per input partition the first and
    last offset, and the output records per topic."""

    firsts: dict[TopicPartition, int] = field(default_factory=dict)
    lasts: dict[TopicPartition, int] = field(default_factory=dict)
    out_counts: dict[str, int] = field(default_factory=dict)


class TaskManager:
    """Every task of one app (see the module docstring)."""

    def __init__(self, topology: Any, config: Config, restorer: Restorer, progress: InputProgress,
                 metrics: Metrics, drops: DropReporter, read_committed: bool = False) -> None:
        self.topology = topology
        self.config = config
        self.restorer = restorer
        self.progress = progress
        self.metrics = metrics
        self.drops = drops
        self.read_committed = read_committed
        self.registry = TaskRegistry()
        #: tasks whose sends failed: closed and recreated by :meth:`restart_failed`
        self.failed: set[TaskId] = set()
        self.consumer: Any = None
        #: sub-topologies whose tasks are kept in step in event time (they write repartition topics)
        self.aligned: frozenset[int] = frozenset()
        self._source_subtopology: dict[str, int] = {}
        self._subtopology_sources: dict[int, set[str]] = {}
        #: partitions whose lag a fetch has measured (the initial estimate does not overwrite it)
        self._lag_measured: set[TopicPartition] = set()
        #: suspended and standby tasks: state kept, no input (see the module docstring)
        self.idle: dict[TaskId, ManagedTask] = {}
        #: the active tasks of the last assignment (told to the leader at the next join)
        self.last_active: frozenset[TaskId] = frozenset()

    def configure(self, consumer: Any, subtopology_sources: Mapping[int, set[str]],
                  aligned: Collection[int] = ()) -> None:
        """The input consumer, per sub-topology its source topics (from the topic plan), and the
        sub-topologies whose tasks are kept in step in event time (:meth:`process_ready`)."""
        self.consumer = consumer
        self.aligned = frozenset(aligned)
        self._subtopology_sources = {sid: set(topics) for sid, topics in subtopology_sources.items()}
        self._source_subtopology = {t: sid for sid, topics in subtopology_sources.items() for t in topics}

    # ---- views -----------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[ManagedTask]:
        return iter(self.registry)

    def __len__(self) -> int:
        return len(self.registry)

    def get(self, tid: TaskId) -> ManagedTask | None:
        return self.registry.get(tid)

    def ids(self) -> list[TaskId]:
        return self.registry.ids()

    def for_partition(self, tp: TopicPartition) -> ManagedTask | None:
        return self.registry.for_partition(tp)

    def running(self) -> list[ManagedTask]:
        """Tasks in state RUNNING (failed ones included until they restart)."""
        return self.registry.running()

    def runnable(self) -> list[ManagedTask]:
        """Running tasks that have not failed: the ones that process records and commit."""
        return [mt for mt in self.registry.running() if mt.id not in self.failed]

    # ---- lifecycle of one task -------------------------------------------------------------------

    def assign(self, assigned: set[TopicPartition], standby: Collection[TaskId] = ()) -> None:
        """Partitions assigned: open a task for each sub-topology partition not open yet (a kept
        one restores only its changelogs' tail); keep a standby for each task of ``standby``;
        suspend the standbys no longer assigned; close what is past its retention."""
        groups = group_by_task(assigned, self._source_subtopology)
        for tid, tps in sorted(groups.items()):
            expected = {TopicPartition(t, tid.partition) for t in self._subtopology_sources[tid.subtopology]}
            if tps != expected:
                log.warning("task %s got %s but reads %s: co-partitioned inputs split across members "
                            "(is another assignor configured?)", tid, sorted(tps), sorted(expected))
            if self.registry.get(tid) is None:
                kept = self.idle.pop(tid, None)
                if kept is None:
                    self.open(tid, tps)
                else:
                    self._resume(kept, tps)
        wanted = {tid for tid in standby if tid not in groups and tid.subtopology in self._subtopology_sources}
        for tid in sorted(wanted):
            kept = self.idle.get(tid)
            if kept is None:
                self._open_standby(tid)
            elif kept.state is TaskState.SUSPENDED:
                self._follow(kept, kept.positions)
        for tid, kept in sorted(self.idle.items()):
            if kept.state is TaskState.STANDBY and tid not in wanted:
                self._park(kept, self.restorer.unfollow(tid))
        self.expire_suspended()
        self.last_active = frozenset(groups)
        log.info("assigned %d partition(s): tasks %s%s", len(assigned),
                 ", ".join(str(t) for t in sorted(groups)) or "none",
                 f"; standby tasks {', '.join(str(t) for t in sorted(wanted))}" if wanted else "")
        self.update_gauges()

    def local_state(self) -> LocalState:
        """For the assignor: the tasks this instance ran last and those it holds state for."""
        return LocalState(self.last_active, frozenset(self.registry.ids()) | frozenset(self.idle))

    # ---- suspended and standby tasks ---------------------------------------------------------------

    def suspendable(self, mt: ManagedTask) -> bool:
        """Whether ``mt`` (just committed) may keep its state when revoked: it is running, has not
        failed, has change-logged stores and ``suspended_task_retention_ms`` is not 0."""
        return (self.config.suspended_task_retention_ms > 0 and mt.state is TaskState.RUNNING
                and mt.id not in self.failed and bool(mt.task.changelog_topics))

    async def revoke(self, tasks: Sequence[ManagedTask], committed: Collection[ManagedTask]) -> None:
        """Revoked ``tasks``: those in ``committed`` (their offsets and changelogs were just made
        durable) are suspended with their changelogs' end offsets, the others closed."""
        keep = [mt for mt in tasks if mt in committed and self.suspendable(mt)]
        ends: dict[TopicPartition, int] = {}
        if keep:
            try:
                ends = await asyncio.wait_for(
                    self.restorer.end_offsets([tp for mt in keep for tp in mt.changelog_partitions()]),
                    END_OFFSETS_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - without the offsets the state cannot be continued
                log.warning("changelog end offsets not read (%r): revoked tasks are closed, not kept", exc)
                keep = []
        for mt in tasks:
            if mt in keep:
                self._suspend(mt, {tp: ends[tp] for tp in mt.changelog_partitions()})
            else:
                self.close(mt, "revoked")

    def _suspend(self, mt: ManagedTask, positions: dict[TopicPartition, int]) -> None:
        self._detach(mt)
        self._park(self._successor(mt, mt.inputs), positions)
        log.info("task %s suspended (state kept for %d ms)", mt.id, self.config.suspended_task_retention_ms)

    def _successor(self, mt: ManagedTask, tps: Collection[TopicPartition]) -> ManagedTask:
        """A new task of ``mt``'s id over ``mt``'s stores (``mt``'s processors are closed)."""
        cfg = self.config
        task = Task(self.topology, mt.id.subtopology, mt.id.partition, cfg.application_id,
                    changelog=cfg.changelog_enabled, stores=mt.task.release_stores())
        exported = {k: v for k, v in mt.exported.items() if k[1] == "store"}  # store counters carry over
        return ManagedTask(task, frozenset(tps), PartitionGroup(tps, cfg.buffered_records_per_partition,
                                                                  cfg.max_task_idle_ms), exported=exported)

    def _park(self, mt: ManagedTask, positions: dict[TopicPartition, int] | None) -> None:
        """Keep ``mt`` suspended; without ``positions`` (a standby that had not started) it is closed."""
        if positions is None:
            self._close_idle(mt, "no state to keep")
            return
        mt.state = TaskState.SUSPENDED
        mt.positions = positions
        mt.suspended_at = time.monotonic()
        self.idle[mt.id] = mt
        if self.config.suspended_task_retention_ms == 0:
            self._close_idle(mt, "suspended_task_retention_ms=0")

    def _resume(self, kept: ManagedTask, tps: set[TopicPartition]) -> None:
        """Make ``kept`` (suspended or standby) active over ``tps``: restore only the tail."""
        positions = self.restorer.unfollow(kept.id) if kept.state is TaskState.STANDBY else kept.positions
        if positions is None:
            self._close_idle(kept, "no state to continue from")
            self.open(kept.id, tps)
            return
        was = kept.state.value
        mt = self._successor(kept, tps)
        mt.state = TaskState.RESTORING
        self.registry.add(mt)
        self.consumer.pause(*tps)
        log.info("task %s resumes from its %s state: restoring its changelogs from %s", mt.id, was,
                 ", ".join(f"{tp.topic}[{tp.partition}]@{o}" for tp, o in sorted(positions.items())))
        self.restorer.add(mt.id, mt.changelog_partitions(), lambda: self._restored(mt), start=positions,
                          on_invalid=lambda _reason: self._reopen(mt))

    def _reopen(self, mt: ManagedTask) -> None:
        """``mt``'s kept state cannot be continued (the restorer said why): a fresh task instead."""
        if self.registry.get(mt.id) is not mt:
            return
        tps = set(mt.inputs)
        self.close(mt, "kept state discarded")
        self.open(mt.id, tps)

    def _open_standby(self, tid: TaskId) -> None:
        """A new standby of ``tid``: empty stores that follow its changelogs from the beginning."""
        cfg = self.config
        task = Task(self.topology, tid.subtopology, tid.partition, cfg.application_id, changelog=cfg.changelog_enabled)
        tps = {TopicPartition(t, tid.partition) for t in self._subtopology_sources[tid.subtopology]}
        mt = ManagedTask(task, frozenset(tps), PartitionGroup(tps, 1, 0))
        if not task.changelog_topics:
            task.close()
            return
        self._follow(mt, None)

    def _follow(self, mt: ManagedTask, positions: dict[TopicPartition, int] | None) -> None:
        mt.state = TaskState.STANDBY
        mt.positions = None
        self.idle[mt.id] = mt
        self.restorer.follow(mt.id, mt.changelog_partitions(), start=positions,
                             on_invalid=lambda _reason: self._restart_standby(mt))

    def _restart_standby(self, mt: ManagedTask) -> None:
        if self.idle.get(mt.id) is not mt:
            return
        self._close_idle(mt, "kept state discarded")
        self._open_standby(mt.id)

    def _close_idle(self, mt: ManagedTask, reason: str) -> None:
        if self.idle.get(mt.id) is mt:
            del self.idle[mt.id]
            if mt.state is TaskState.STANDBY:
                self.restorer.remove(mt.id)
        mt.task.close()
        mt.state = TaskState.CLOSED
        log.info("task %s: kept state dropped (%s)", mt.id, reason)

    def expire_suspended(self) -> None:
        """Close the suspended tasks kept longer than ``suspended_task_retention_ms``."""
        if not self.idle:
            return
        limit = time.monotonic() - self.config.suspended_task_retention_ms / 1000
        expired = [mt for mt in self.idle.values() if mt.state is TaskState.SUSPENDED and mt.suspended_at <= limit]
        for mt in expired:
            self._close_idle(mt, f"not assigned back within suspended_task_retention_ms="
                                 f"{self.config.suspended_task_retention_ms}")
        if expired:
            self.update_gauges()

    async def report_initial_lag(self, assigned: set[TopicPartition]) -> None:
        """Set ``streamproc_consumer_lag`` of newly ``assigned`` partitions before their first fetch:
        end offset (the last stable one under exactly-once) minus the committed offset (or where
        ``auto_offset_reset`` starts). A partition a fetch already measured keeps that figure."""
        tps = sorted(assigned)
        if not tps:
            return
        consumer = self.consumer
        try:
            ends = await consumer.end_offsets(tps)
            starts: dict[TopicPartition, int] = {}
            for tp in tps:
                committed = await consumer.committed(tp)
                if committed is not None:
                    starts[tp] = committed
            missing = [tp for tp in tps if tp not in starts]
            if missing:
                reset = await (consumer.beginning_offsets(missing) if self.config.auto_offset_reset == "earliest"
                               else consumer.end_offsets(missing))
                starts.update(reset)
        except Exception as exc:  # noqa: BLE001 - the figures come with the first fetch instead
            log.debug("initial lag of %s not measured: %r", tps, exc)
            return
        for tp in tps:
            if tp not in self._lag_measured and tp in ends:
                self.metrics.lag.labels(tp.topic, str(tp.partition)).set(max(0, ends[tp] - starts[tp]))

    def affected(self, revoked: set[TopicPartition]) -> list[ManagedTask]:
        """The tasks that read any of ``revoked``, by id."""
        return sorted({mt for tp in revoked if (mt := self.registry.for_partition(tp)) is not None},
                      key=lambda m: m.id)

    def open(self, tid: TaskId, tps: set[TopicPartition]) -> ManagedTask:
        """Create task ``tid`` reading ``tps``; its input stays paused until its stores are restored."""
        cfg = self.config
        task = Task(self.topology, tid.subtopology, tid.partition, cfg.application_id,
                    changelog=cfg.changelog_enabled)
        buffer = PartitionGroup(tps, cfg.buffered_records_per_partition, cfg.max_task_idle_ms)
        mt = ManagedTask(task, frozenset(tps), buffer)
        self.registry.add(mt)
        self.consumer.pause(*tps)
        changelogs = mt.changelog_partitions()
        if changelogs:
            mt.state = TaskState.RESTORING
            self.restorer.add(tid, changelogs, lambda: self._restored(mt))
        else:
            self._restored(mt)
        self.update_gauges()
        return mt

    def _restored(self, mt: ManagedTask) -> None:
        if self.registry.get(mt.id) is not mt or mt.state is TaskState.CLOSED:
            return
        mt.state = TaskState.RUNNING
        mt.task.initialize()
        assigned = self.consumer.assignment()
        self.consumer.resume(*[tp for tp in mt.inputs if tp in assigned])
        self.update_gauges()
        log.info("task %s running (inputs %s)", mt.id,
                 ", ".join(f"{tp.topic}[{tp.partition}]" for tp in sorted(mt.inputs)))

    def close(self, mt: ManagedTask, reason: str) -> None:
        """Close ``mt``: stop its restore, forget its buffered input and its pending acks."""
        if mt.state is TaskState.CLOSED:
            return
        self.restorer.remove(mt.id)
        self._detach(mt)
        mt.task.close()
        mt.state = TaskState.CLOSED
        self.update_gauges()
        log.info("task %s closed (%s)", mt.id, reason)

    def _detach(self, mt: ManagedTask) -> None:
        """Take ``mt`` out of the running set: its pending acks, drop counters, buffered input,
        registry entry and failure mark (its stores are the caller's business)."""
        for tp in mt.inputs:
            self.progress.close_partition(tp)
        self.export_metrics([mt])
        mt.buffer.clear()
        mt.paused.clear()
        self.registry.remove(mt.id)
        self.failed.discard(mt.id)

    def close_all(self, reason: str) -> None:
        for mt in self.registry:
            self.close(mt, reason)
        for mt in list(self.idle.values()):
            self._close_idle(mt, reason)
        for state in TaskState:
            if state is not TaskState.CLOSED:
                self.metrics.tasks.labels(state.value).set(0)

    # ---- failures ------------------------------------------------------------------------------

    def fail(self, tp: Any, error: BaseException) -> None:
        """A send caused by input partition ``tp`` failed: its task restarts (once)."""
        mt = self.registry.for_partition(tp)
        if mt is None or mt.id in self.failed:
            return
        self.failed.add(mt.id)
        self._pause_inputs(mt)  # nothing more to fetch until it restarts (rewound then)
        self.metrics.task_failures.labels(type(error).__name__).inc()
        log.error("task %s failed: %s; it restarts from its last committed offset", mt.id, error)

    def _pause_inputs(self, mt: ManagedTask) -> None:
        assigned = self.consumer.assignment()
        self.consumer.pause(*[tp for tp in mt.inputs if tp in assigned])

    def fail_running(self, error: BaseException) -> None:
        """Exactly-once: the transaction failed, every running task restarts."""
        for mt in self.running():
            for tp in mt.inputs:
                self.fail(tp, error)

    async def restart_failed(self) -> None:
        """Close each failed task, rewind its input to its last committed offset, open it again."""
        consumer = self.consumer
        for tid in sorted(self.failed):
            mt = self.registry.get(tid)
            self.failed.discard(tid)
            if mt is None:
                continue
            tps = set(mt.inputs)
            self.close(mt, "failed")
            for tp in tps:
                committed = await consumer.committed(tp)
                if committed is None:
                    if self.config.auto_offset_reset == "earliest":
                        await consumer.seek_to_beginning(tp)
                    else:
                        await consumer.seek_to_end(tp)
                else:
                    consumer.seek(tp, committed)
                log.info("task %s: %s[%d] rewound to committed offset %s", tid, tp.topic, tp.partition, committed)
            self.open(tid, tps)

    # ---- input ---------------------------------------------------------------------------------

    def buffer(self, batch: Mapping[TopicPartition, Sequence[Any]]) -> None:
        """Hand each partition's fetched records to its task's input buffer; pause a partition whose
        buffer is full. Records for a task that cannot take them now are fetched again later."""
        consumer = self.consumer
        for tp, records in batch.items():
            if not records:
                continue
            mt = self.registry.for_partition(tp)
            if mt is None or mt.state is not TaskState.RUNNING:
                self._refetch_later(tp, records[0].offset, mt)
                continue
            if mt.id in self.failed:
                continue  # fetched before it failed: it is rewound to its committed offset at restart
            mt.buffer.add(tp, records)
            if tp not in mt.paused and mt.buffer.full(tp):
                consumer.pause(tp)
                mt.paused.add(tp)

    def _refetch_later(self, tp: TopicPartition, offset: int, mt: ManagedTask | None) -> None:
        """Records of a partition whose task cannot take them now: rewind so they are fetched
        again (never skipped: a later batch would otherwise make them committable)."""
        state = "no task" if mt is None else mt.state.value
        log.warning("%s[%d]: %s; rewinding to offset %d to fetch it again", tp.topic, tp.partition, state, offset)
        try:
            self.consumer.seek(tp, offset)
        except Exception as exc:
            log.debug("cannot rewind %s: %r", tp, exc)

    def poll_timeout_ms(self, default: int) -> int:
        """``default``, or less when a task waiting for a lagging input reaches ``max_task_idle_ms``
        sooner (it then processes what it has)."""
        timeout = default
        now = now_ms()
        for mt in self.registry.running():
            since = mt.buffer.waiting_since()
            if since is not None:
                timeout = min(timeout, max(0, since + self.config.max_task_idle_ms - now))
        return timeout

    async def process_ready(self, buf: SendBuffer, on_error: RecordErrorHandler) -> Round:
        """Process every task's buffered records that the ordering rule releases now; their outputs
        go to ``buf`` (attributed to their input partition). Returns what was processed.

        The tasks of a sub-topology in :attr:`aligned` (it writes a repartition topic) are also
        kept in step with each other (:meth:`_run_aligned`): the records they write to a
        repartition partition, from every partition of their input, are then nearly in timestamp
        order, as one task over all the input would write them, so the operators downstream do not
        see one task's records hours after another's. Other tasks process all they can at once."""
        done = Round()
        aligned: dict[int, list[ManagedTask]] = {}
        for mt in self.runnable():
            if mt.id.subtopology in self.aligned:
                aligned.setdefault(mt.id.subtopology, []).append(mt)
            elif len(mt.buffer):
                await self._run_task(mt, buf, on_error, done, None)
        for tasks in aligned.values():
            await self._run_aligned(tasks, buf, on_error, done)
        for mt in self.runnable():
            for tp in [tp for tp in mt.paused if not mt.buffer.full(tp)]:
                mt.paused.discard(tp)
                self.consumer.resume(tp)
        for tp, last in done.lasts.items():
            hw = self.consumer.highwater(tp)
            if hw is not None:
                self._lag_measured.add(tp)
                self.metrics.lag.labels(tp.topic, str(tp.partition)).set(max(0, hw - last - 1))
        return done

    async def _run_aligned(self, tasks: list[ManagedTask], buf: SendBuffer, on_error: RecordErrorHandler,
                           done: Round) -> None:
        """Release the records of ``tasks`` (one sub-topology's) in slices of event time: each
        pass, the horizon is :data:`ALIGN_SLICE_MS` above the task furthest behind (its oldest
        buffered record, or the last timestamp of an input it waits for), and every ready task
        releases what lies below it. A task waiting for a lagging input thus holds the others
        back, at most ``max_task_idle_ms`` (then it stops counting). Ends when a pass releases
        nothing."""
        while True:
            floors: list[int] = []
            ready: list[ManagedTask] = []
            now = now_ms()
            for mt in tasks:
                if mt.id in self.failed:
                    continue
                lagging = await self._lagging(mt)
                if mt.buffer.ready(now, lagging):
                    if len(mt.buffer):
                        ready.append(mt)
                        floors.append(mt.buffer.head_timestamp())  # type: ignore[arg-type]
                elif (floor := mt.buffer.floor(lagging)) is not None:
                    floors.append(floor)
            if not ready:
                return
            horizon = min(floors) + ALIGN_SLICE_MS
            progressed = False
            for mt in ready:
                progressed |= await self._run_task(mt, buf, on_error, done, horizon)
            if not progressed:
                return

    async def _run_task(self, mt: ManagedTask, buf: SendBuffer, on_error: RecordErrorHandler, done: Round,
                        horizon: int | None) -> bool:
        """Process the runs ``mt``'s buffer releases (up to ``horizon``); True if it processed any."""
        group = mt.buffer
        metrics = self.metrics
        progressed = False
        while mt.id not in self.failed:
            lagging = await self._lagging(mt)
            enforced = group.enforced_runs
            found = group.next_run(now_ms(), lagging, horizon)
            if found is None:
                break
            progressed = True
            tp, records = found
            if group.enforced_runs != enforced:
                self._report_enforced(mt, lagging)
            started = time.perf_counter()
            self._run_records(mt, tp, records, buf, on_error)
            outputs = mt.task.drain_outputs()
            if outputs:
                for topic, n in buf.add_outputs(outputs, tp).items():
                    done.out_counts[topic] = done.out_counts.get(topic, 0) + n
            metrics.processing_latency.observe(time.perf_counter() - started)
            metrics.records_in.labels(tp.topic, str(tp.partition)).inc(len(records))
            done.firsts.setdefault(tp, records[0].offset)
            done.lasts[tp] = records[-1].offset
        return progressed

    @staticmethod
    def _run_records(mt: ManagedTask, tp: TopicPartition, records: Sequence[Any], buf: SendBuffer,
                     on_error: RecordErrorHandler) -> None:
        """Run ``records`` through the task; a failing record goes to ``on_error``, then the rest
        of the run goes on. A record a join releases from its buffer and that fails then goes to
        ``on_error`` as itself (``released``), and the record being processed goes on."""
        task = mt.task
        task.released_error_handler = lambda exc, origin: on_error(exc, tp, origin, buf, True)
        start = 0
        n = len(records)
        while start < n:
            try:
                task.process(tp.topic, tp.partition, records[start:] if start else records)
                return
            except RecordError:
                raise  # the fail policy, raised for a released record: names that record already
            except Exception as exc:  # routed by the error policy
                if task.last_count == 0:
                    raise  # failed before any record: not a record error
                failed = start + task.last_count - 1
                on_error(exc, tp, records[failed], buf, False)
                start = failed + 1

    async def _lagging(self, mt: ManagedTask) -> list[TopicPartition]:
        """``mt``'s input partitions with nothing buffered but unread records on the broker."""
        empty = mt.buffer.empty_partitions()
        return [tp for tp in empty if await self._has_unread(tp)] if empty else []

    async def _has_unread(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` has records on the broker beyond the consumer's position (True while that
        is not known yet): a task with nothing buffered for ``tp`` waits for them."""
        consumer = self.consumer
        try:
            end = consumer.last_stable_offset(tp) if self.read_committed else None
            if end is None or end < 0:
                end = consumer.highwater(tp)
            if end is None:
                return True
            position = await asyncio.wait_for(consumer.position(tp), 0.05)
        except TimeoutError:
            return True  # the position is being reset (after a seek or an assignment)
        except Exception as exc:
            log.debug("lag of %s unknown: %r", tp, exc)
            return False
        return bool(position < end)

    def _report_enforced(self, mt: ManagedTask, lagging: Sequence[TopicPartition]) -> None:
        self.metrics.enforced_processing.inc()
        now = time.monotonic()
        if now - mt.enforced_logged_at >= ENFORCED_LOG_INTERVAL_S:
            mt.enforced_logged_at = now
            log.warning("task %s waited max_task_idle_ms=%d for records of %s that have not arrived; it "
                        "processes its other inputs meanwhile, so records may be processed out of timestamp "
                        "order (%d such run(s) so far; see streamproc_enforced_processing_total)",
                        mt.id, self.config.max_task_idle_ms,
                        ", ".join(f"{tp.topic}[{tp.partition}]" for tp in lagging), mt.buffer.enforced_runs)

    # ---- metrics ---------------------------------------------------------------------------------

    def export_metrics(self, tasks: Sequence[ManagedTask]) -> None:
        """Add the tasks' drop counters to Prometheus (deltas, by operator and reason) and log the
        drops that are due (drops.py)."""
        for mt in tasks:
            task = mt.task
            self.drops.export(task.dropped_by_operator(), mt.exported, task.late_example)

    def update_gauges(self) -> None:
        counts = self.registry.counts()
        for mt in self.idle.values():
            counts[mt.state.value] = counts.get(mt.state.value, 0) + 1
        for state, n in counts.items():
            self.metrics.tasks.labels(state).set(n)
