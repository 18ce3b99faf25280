"""``StreamApp``: a topology as a long-running Kafka service (at-least-once, delayed acks).

::

    app = StreamApp(topology, Config(application_id="sessions", bootstrap_servers="localhost:9092"))
    await app.run()          # until app.request_stop() / await app.stop() / SIGTERM (CLI) / a fatal error

Lifecycle (a :class:`~streamproc.runtime.service.Service` with ordered children): before the
children start, the topic plan is resolved (co-partitioning checked, missing output, repartition,
changelog and dead-letter topics created). Children start in the order metrics -> producer ->
acks (purgatory timer) -> restorer -> consumer (joins the group) -> committer, and stop in reverse,
after the app's own shutdown (stop fetching, finish the batch, final commit, close tasks).

Data flow, per ``getmany`` batch, with the processing lock held: each partition's records run
through their task synchronously (``Task.process``, no ``await`` per record); the outputs are
buffered per output partition and leave as whole producer batches; each batch's future is
attributed to the input partitions whose records it carries, in the
:class:`~streamproc.purgatory.AckTracker`, at the first input offset of the batch. A partition's
committable offset is therefore its lowest un-acknowledged input offset (see ``committer.py`` for
the commit order).

Rebalances (aiokafka's eager protocol): on revoke, the tasks of the revoked partitions are
committed (``final``: every send waited for) and closed; on assignment, one task per sub-topology
partition is created with its input paused, its stores restored from their changelogs by the
:class:`~streamproc.runtime.restore.Restorer`, then its input resumed. A batch fetched before a
rebalance that started while the batch waited for the lock is discarded: the revoke committed only
what was processed, and the reassignment resets positions to the committed offsets, so those
records are fetched again (by whichever member owns them next).

A task fails when a send it caused fails or is not acknowledged within ``delivery_timeout_ms``
(the tracker's delayed ack expires): it is closed, its input is rewound to its last committed
offset, and it is recreated (with a restore). Record errors follow the error policies
(``error_policy.py``). Fatal errors (``fail`` policy, a crashed component) stop the app without a
final commit and are raised from :meth:`StreamApp.run`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import uuid
from collections.abc import Hashable, Sequence
from types import SimpleNamespace
from typing import Any

from aiokafka import ConsumerRebalanceListener, TopicPartition

from ..config import Config
from ..errors import StreamprocError
from .acks import register_batch
from .committer import Committer
from .consumer import AckService, InputConsumer
from .drops import DropReporter
from .error_policy import ErrorPolicy, Stage, classify, dead_letter_headers
from .metrics import Metrics
from .partition_group import PartitionGroup
from .producer import OutputProducer, SendBuffer, to_bytes
from .restore import Restorer
from .service import Service
from .snapshot import Snapshots, save_on_shutdown
from .task import Task, TaskId
from .tasks import ManagedTask, TaskRegistry, TaskState, group_by_task
from .topics import RepartitionPurger, TopicAdmin, TopicPlan, plan_topics
from .transactions import EOS_PRODUCER_DEFAULTS, ExactlyOnce

__all__ = ["RecordError", "ShutdownTimeoutError", "StreamApp"]

log = logging.getLogger("streamproc.app")

#: How often wall-clock punctuation runs (none of the built-in operators needs it).
_PUNCTUATE_EVERY_S = 1.0


class RecordError(StreamprocError):
    """A record failed under the ``fail`` error policy; names its position and the cause."""


class ShutdownTimeoutError(StreamprocError):
    """The graceful stop did not finish within ``shutdown_timeout_ms``."""


class _Listener(ConsumerRebalanceListener):
    def __init__(self, app: StreamApp) -> None:
        self.app = app

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.app._on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self.app._on_assigned(set(assigned))


class StreamApp(Service):
    """Runs ``topology`` on Kafka with ``config`` (or keyword settings, see :class:`Config`)."""

    label = "app"

    def __init__(self, topology: Any, config: Config | None = None, **settings: Any) -> None:
        super().__init__()
        if config is None:
            config = Config(**settings)
        elif settings:
            config = config.replace(**settings)
        self.topology = topology
        self.config = config
        app_id = config.application_id
        self.lock = asyncio.Lock()
        self.metrics = Metrics(config.metrics_port, config.metrics_host)
        self.drops = DropReporter(self.metrics.dropped)
        # durability (docs/durability.md): local snapshots under state_dir; exactly-once transactions
        self.snapshots = Snapshots(config.state_dir, app_id) if config.state_dir else None
        eos = config.processing_guarantee == "exactly_once_v2"
        producer_config = dict(config.producer_config)
        if eos:
            instance = self.snapshots.instance_id() if self.snapshots is not None else uuid.uuid4().hex[:16]
            producer_config = {**EOS_PRODUCER_DEFAULTS, **producer_config, "transactional_id": f"{app_id}-{instance}"}
        self.producer = OutputProducer(config.bootstrap_servers, producer_config, f"{app_id}-producer")
        self.eos = ExactlyOnce(self, producer_config["transactional_id"],
                               int(producer_config.get("transaction_timeout_ms", 10_000))) if eos else None
        self.producer.transactions = self.eos
        self.acks = AckService(config.delivery_timeout_ms, self._on_ack_failure)
        self.restorer = Restorer(config.bootstrap_servers, f"{app_id}-restore", self.metrics,
                                 config.consumer_config, config.restore_log_interval_ms,
                                 isolation_level="read_committed" if eos else "read_uncommitted",
                                 snapshots=self.snapshots)
        self.input: InputConsumer | None = None
        self.committer = Committer(self)
        self.purger = RepartitionPurger(config.bootstrap_servers, f"{app_id}-purger",
                                        config.repartition_purge_interval_ms)
        self.tasks = TaskRegistry()
        self.plan: TopicPlan | None = None
        #: input partition -> first offset processed since the last changelog flush
        self.unflushed: dict[TopicPartition, int] = {}
        self.fatal: BaseException | None = None
        self._epoch = 0
        self._failed: set[TaskId] = set()
        self._stop_requested = False
        self._running = False
        self._run_done: asyncio.Event | None = None
        self._last_punctuate = 0.0
        self._subtopology_sources: dict[int, set[str]] = {}
        self._error_policy = {
            Stage.DESERIALIZATION: ErrorPolicy(config.deserialization_error_policy),
            Stage.PROCESSING: ErrorPolicy(config.processing_error_policy),
        }

    # ---- lifecycle -------------------------------------------------------------------------------

    def children(self) -> Sequence[Service]:
        kids: list[Service] = [self.metrics, self.producer, self.acks, self.purger, self.restorer]
        if self.input is not None:
            kids.append(self.input)
        kids.append(self.committer)
        return kids

    @property
    def consumer(self) -> Any:
        assert self.input is not None and self.input.consumer is not None, "app not started"
        return self.input.consumer

    async def start(self) -> None:
        if self.plan is None:
            await self._prepare_topics()
        if self.snapshots is not None and not self._started:
            self.snapshots.lock()
        try:
            await super().start()
        except BaseException:
            if self.snapshots is not None:
                self.snapshots.unlock()
            raise

    async def run(self) -> None:
        """Start, process until a stop is requested or a fatal error, then stop (within
        ``shutdown_timeout_ms``). Raises the fatal error, if any."""
        self._running = True
        self._run_done = asyncio.Event()
        previous_gc = gc.get_threshold()
        if self.config.gc_threshold:
            gc.set_threshold(self.config.gc_threshold, *previous_gc[1:])
        try:
            try:
                await self.start()
                await self._process_loop()
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 - recorded, reported after shutdown
                self._set_fatal(exc)
            try:
                await asyncio.wait_for(Service.stop(self), self.config.shutdown_timeout_ms / 1000)
            except TimeoutError:
                self._set_fatal(ShutdownTimeoutError(
                    f"graceful stop did not finish within shutdown_timeout_ms={self.config.shutdown_timeout_ms}"))
        finally:
            gc.set_threshold(*previous_gc)
            self._running = False
            self._run_done.set()
        if self.fatal is not None:
            raise self.fatal

    def request_stop(self) -> None:
        """Ask :meth:`run` to stop after the current batch (safe from a signal handler)."""
        if not self._stop_requested:
            log.info("stop requested: finishing the current batch, committing, closing")
        self._stop_requested = True

    async def stop(self) -> None:
        """Stop gracefully: when :meth:`run` is active, request a stop and wait for it to finish."""
        if self._running and self._run_done is not None:
            self.request_stop()
            await self._run_done.wait()
            return
        await super().stop()

    async def on_stop(self) -> None:
        self._stop_requested = True
        if self.fatal is None and self.input is not None and self.input.started:
            async with self.lock:
                if self.tasks.running():
                    await self.committer.commit_locked("shutdown", final=True)
                if self.snapshots is not None and self.fatal is None:
                    try:
                        await save_on_shutdown(self, self.snapshots)
                    except Exception as exc:  # noqa: BLE001 - snapshots are an optimisation
                        log.warning("snapshots not written: %s: %s", type(exc).__name__, exc)
        for mt in self.tasks:
            self._close_task(mt, "shutdown")
        self.drops.flush()
        if self.snapshots is not None:
            self.snapshots.unlock()
        self.metrics.tasks.labels("running").set(0)
        self.metrics.tasks.labels("restoring").set(0)

    def _set_fatal(self, exc: BaseException) -> None:
        if self.fatal is None:
            self.fatal = exc
            log.error("fatal: %s: %s", type(exc).__name__, exc)
        self._stop_requested = True

    # ---- topics ----------------------------------------------------------------------------------

    async def _prepare_topics(self) -> None:
        from ..stores import changelog_topic_config

        cfg = self.config
        app_id = cfg.application_id
        admin = TopicAdmin(cfg.bootstrap_servers, f"{app_id}-admin")
        existing = await admin.partition_counts()
        subs = []
        changelog_configs: dict[str, dict[str, str]] = {}
        for st in self.topology.subtopologies_for(app_id):
            probe = Task(self.topology, st.id, 0, app_id, changelog=cfg.changelog_enabled)
            try:
                for name, topic in probe.changelog_topics.items():
                    changelog_configs[topic] = changelog_topic_config(probe.stores[name])
                changelogs = dict(probe.changelog_topics)
            finally:
                probe.close()
            key_serdes = {t: _serde_name(self.topology.source_serdes(t, app_id)[0]) for t in st.source_topics}
            subs.append(SimpleNamespace(id=st.id, source_topics=st.source_topics, sink_topics=st.sink_topics,
                                        repartition_topics=st.repartition_topics, changelog_topics=changelogs,
                                        key_serdes=key_serdes))
            self._subtopology_sources[st.id] = set(st.source_topics)
        uses_dlq = ErrorPolicy.DEAD_LETTER in self._error_policy.values()
        plan = plan_topics(subs, existing, changelog_configs, cfg.dead_letter_topic if uses_dlq else None)
        missing = plan.missing(existing)
        if missing:
            if not cfg.create_topics:
                raise StreamprocError(
                    f"topics {[s.name for s in missing]} do not exist and create_topics is off; create them "
                    f"(partitions: {', '.join(f'{s.name}={s.partitions}' for s in missing)})")
            await admin.create(missing, cfg.replication_factor)
        for sid, n in sorted(plan.subtopology_partitions.items()):
            log.info("sub-topology %d: %d task(s), sources %s", sid, n, sorted(self._subtopology_sources[sid]))
        self.plan = plan
        self.producer.partition_counts = plan.partition_counts()
        self.purger.topics = frozenset(t for st in subs for t in st.repartition_topics)
        consumer_config = dict(cfg.consumer_config)
        if self.eos is not None:  # exactly-once: never read records of open or aborted transactions
            consumer_config["isolation_level"] = "read_committed"
        self.input = InputConsumer(cfg.bootstrap_servers, app_id, f"{app_id}-consumer", plan.source_topics,
                                   _Listener(self), cfg.auto_offset_reset, cfg.max_poll_records,
                                   consumer_config)

    # ---- the processing loop ---------------------------------------------------------------------

    async def _process_loop(self) -> None:
        cfg = self.config
        consumer = self.consumer
        while not self._stop_requested:
            self._check_components()
            if self._failed:
                async with self.lock:
                    await self._restart_failed()
            if self.tasks and time.monotonic() - self._last_punctuate >= _PUNCTUATE_EVERY_S:
                async with self.lock:
                    await self._punctuate()
            batch = await consumer.getmany(timeout_ms=self._poll_timeout_ms(), max_records=cfg.max_poll_records)
            epoch = self._epoch  # the records belong to the assignment current at return
            async with self.lock:
                if epoch != self._epoch:
                    if batch:
                        log.debug("discarding a batch fetched before a rebalance (it is fetched again)")
                    continue
                if batch:
                    self._buffer_batch(batch)
                await self._process_ready()
        self._check_components()

    def _poll_timeout_ms(self) -> int:
        """``poll_timeout_ms``, or less when a task waiting for a lagging input reaches
        ``max_task_idle_ms`` sooner (it then processes what it has)."""
        timeout = self.config.poll_timeout_ms
        now = _now_ms()
        for mt in self.tasks.running():
            since = mt.buffer.waiting_since()
            if since is not None:
                timeout = min(timeout, max(0, since + self.config.max_task_idle_ms - now))
        return timeout

    def _check_components(self) -> None:
        if self.fatal is not None:
            raise self.fatal
        for child in self.children():
            if child.crash is not None:
                raise StreamprocError(f"{child.label} failed: {type(child.crash).__name__}: {child.crash}") \
                    from child.crash

    def _buffer_batch(self, batch: dict[TopicPartition, list[Any]]) -> None:
        """Hand each partition's fetched records to its task's input buffer; pause a partition whose
        buffer is full (resumed in :meth:`_process_ready` once it is below the bound)."""
        consumer = self.consumer
        for tp, records in batch.items():
            if not records:
                continue
            mt = self.tasks.for_partition(tp)
            if mt is None or mt.state is not TaskState.RUNNING or mt.id in self._failed:
                self._refetch_later(tp, records[0].offset, mt)
                continue
            mt.buffer.add(tp, records)
            if tp not in mt.paused and mt.buffer.full(tp):
                consumer.pause(tp)
                mt.paused.add(tp)

    async def _process_ready(self) -> None:
        """Process every task's buffered records that the ordering rule releases now, send their
        outputs as whole producer batches and register them with the ack tracker."""
        metrics = self.metrics
        consumer = self.consumer
        buf = self.producer.buffer()
        firsts: dict[TopicPartition, int] = {}
        lasts: dict[TopicPartition, int] = {}
        out_counts: dict[str, int] = {}
        for mt in self.tasks.running():
            if mt.id in self._failed or not len(mt.buffer):
                continue
            group = mt.buffer
            while True:
                empty = group.empty_partitions()
                lagging = [tp for tp in empty if await self._has_unread(tp)] if empty else ()
                enforced = group.enforced_runs
                found = group.next_run(_now_ms(), lagging)
                if found is None:
                    break
                tp, records = found
                if group.enforced_runs != enforced:
                    self._report_enforced(mt, lagging)
                started = time.perf_counter()
                self._run_records(mt, tp, records, buf)
                outputs = mt.task.drain_outputs()
                if outputs:
                    for topic, n in buf.add_outputs(outputs, tp).items():
                        out_counts[topic] = out_counts.get(topic, 0) + n
                metrics.processing_latency.observe(time.perf_counter() - started)
                metrics.records_in.labels(tp.topic, str(tp.partition)).inc(len(records))
                firsts.setdefault(tp, records[0].offset)
                lasts[tp] = records[-1].offset
                if mt.id in self._failed:
                    break
            for tp in [tp for tp in mt.paused if not group.full(tp)]:
                mt.paused.discard(tp)
                consumer.resume(tp)
        if not firsts:
            return
        for tp, last in lasts.items():
            hw = consumer.highwater(tp)
            if hw is not None:
                metrics.lag.labels(tp.topic, str(tp.partition)).set(max(0, hw - last - 1))
        sent = await buf.flush() if len(buf) else []
        tracker = self.acks.tracker
        register_batch(tracker, firsts, lasts, sent, self.unflushed)
        for topic, n in out_counts.items():
            metrics.records_out.labels(topic).inc(n)
        metrics.pending_acks.set(tracker.pending_sends())

    async def _has_unread(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` has records on the broker beyond the consumer's position (True while that
        is not known yet): a task with nothing buffered for ``tp`` waits for them."""
        consumer = self.consumer
        try:
            end = consumer.last_stable_offset(tp) if self.eos is not None else None
            if end is None or end < 0:
                end = consumer.highwater(tp)
            if end is None:
                return True
            position = await asyncio.wait_for(consumer.position(tp), 0.05)
        except TimeoutError:
            return True  # the position is being reset (after a seek or an assignment)
        except Exception as exc:  # noqa: BLE001 - not assigned any more: nothing to wait for
            log.debug("lag of %s unknown: %r", tp, exc)
            return False
        return bool(position < end)

    def _report_enforced(self, mt: ManagedTask, lagging: Sequence[TopicPartition]) -> None:
        self.metrics.enforced_processing.inc()
        now = time.monotonic()
        if now - mt.enforced_logged_at >= 60.0:
            mt.enforced_logged_at = now
            log.warning("task %s waited max_task_idle_ms=%d for records of %s that have not arrived; it "
                        "processes its other inputs meanwhile, so records may be processed out of timestamp "
                        "order (%d such run(s) so far; see streamproc_enforced_processing_total)",
                        mt.id, self.config.max_task_idle_ms,
                        ", ".join(f"{tp.topic}[{tp.partition}]" for tp in lagging), mt.buffer.enforced_runs)

    def _refetch_later(self, tp: TopicPartition, offset: int, mt: ManagedTask | None) -> None:
        """Records of a partition whose task cannot take them now: rewind so they are fetched
        again (never skipped: a later batch would otherwise make them committable)."""
        state = "no task" if mt is None else ("failed" if mt.id in self._failed else mt.state.value)
        log.warning("%s[%d]: %s; rewinding to offset %d to fetch it again", tp.topic, tp.partition, state, offset)
        try:
            self.consumer.seek(tp, offset)
        except Exception as exc:  # noqa: BLE001 - not assigned any more: its next owner reads it
            log.debug("cannot rewind %s: %r", tp, exc)

    def _run_records(self, mt: ManagedTask, tp: TopicPartition, records: Sequence[Any], buf: SendBuffer) -> None:
        """Run ``records`` through the task; a failing record goes to its error policy, then the
        rest of the batch runs."""
        task = mt.task
        start = 0
        n = len(records)
        while start < n:
            try:
                task.process(tp.topic, tp.partition, records[start:] if start else records)
                return
            except Exception as exc:  # routed by the error policy
                if task.last_count == 0:
                    raise  # failed before any record: not a record error
                failed = start + task.last_count - 1
                self._record_error(exc, tp, records[failed], buf)
                start = failed + 1

    def _record_error(self, exc: Exception, tp: TopicPartition, rec: Any, buf: SendBuffer) -> None:
        stage = classify(exc)
        policy = self._error_policy[stage]
        where = f"{tp.topic}[{tp.partition}]@{rec.offset}"
        if policy is ErrorPolicy.FAIL:
            setting = f"{stage.value}_error_policy"
            raise RecordError(
                f"{stage.value} error on record {where}: {type(exc).__name__}: {exc} "
                f"({setting}=fail; set it to skip or dead-letter to go on)") from exc
        if policy is ErrorPolicy.SKIP:
            self.drops.add(getattr(exc, "operator", None) or tp.topic, f"{stage.value}_error")
            log.warning("skipped record %s (%s error, %s: %s)", where, stage.value, type(exc).__name__, exc)
            return
        topic = self.config.dead_letter_topic
        headers = dead_letter_headers(rec.headers, exc, stage, tp.topic, tp.partition, rec.offset)
        key = rec.key if rec.key is None or type(rec.key) is bytes else to_bytes(rec.key, "dead letter key")
        value = rec.value if rec.value is None or type(rec.value) is bytes else to_bytes(rec.value, "dead letter")
        buf.add(topic, key, value, rec.timestamp, headers, source=tp)
        self.metrics.dead_lettered.labels(stage.value).inc()
        log.warning("dead-lettered record %s to %s (%s error, %s: %s)", where, topic, stage.value,
                    type(exc).__name__, exc)

    async def _punctuate(self) -> None:
        self._last_punctuate = time.monotonic()
        now_ms = int(time.time() * 1000)
        buf = self.producer.buffer()
        for mt in self.tasks.running():
            mt.task.punctuate_wall_clock(now_ms)
            for out in mt.task.drain_outputs():
                buf.add(out.topic, to_bytes(out.key, "key"), to_bytes(out.value, "value"), out.timestamp,
                        out.headers)
        if len(buf):
            for fut, _ in await buf.flush():
                fut.add_done_callback(_log_send_failure)

    # ---- tasks -----------------------------------------------------------------------------------

    def _open_task(self, tid: TaskId, tps: set[TopicPartition]) -> ManagedTask:
        cfg = self.config
        task = Task(self.topology, tid.subtopology, tid.partition, cfg.application_id,
                    changelog=cfg.changelog_enabled)
        mt = ManagedTask(task, frozenset(tps), PartitionGroup(tps, cfg.buffered_records_per_partition,
                                                            cfg.max_task_idle_ms))
        self.tasks.add(mt)
        self.consumer.pause(*tps)
        changelogs = mt.changelog_partitions()
        if changelogs:
            mt.state = TaskState.RESTORING
            self.restorer.add(tid, changelogs, lambda: self._restored(mt))
        else:
            self._restored(mt)
        self._update_task_gauges()
        return mt

    def _restored(self, mt: ManagedTask) -> None:
        if self.tasks.get(mt.id) is not mt or mt.state is TaskState.CLOSED:
            return
        mt.state = TaskState.RUNNING
        mt.task.initialize()
        assigned = self.consumer.assignment()
        self.consumer.resume(*[tp for tp in mt.inputs if tp in assigned])
        self._update_task_gauges()
        log.info("task %s running (inputs %s)", mt.id,
                 ", ".join(f"{tp.topic}[{tp.partition}]" for tp in sorted(mt.inputs)))

    def _close_task(self, mt: ManagedTask, reason: str) -> None:
        if mt.state is TaskState.CLOSED:
            return
        self.restorer.remove(mt.id)
        tracker = self.acks.tracker
        for tp in mt.inputs:
            tracker.close_partition(tp)
            self.unflushed.pop(tp, None)
        self.export_task_metrics([mt])
        mt.buffer.clear()
        mt.paused.clear()
        mt.task.close()
        mt.state = TaskState.CLOSED
        self.tasks.remove(mt.id)
        self._failed.discard(mt.id)
        self._update_task_gauges()
        log.info("task %s closed (%s)", mt.id, reason)

    def _update_task_gauges(self) -> None:
        for state, n in self.tasks.counts().items():
            self.metrics.tasks.labels(state).set(n)

    def export_task_metrics(self, tasks: list[ManagedTask]) -> None:
        """Add the tasks' drop counters to Prometheus (as deltas, by operator and reason) and log
        the drops that are due (drops.py)."""
        for mt in tasks:
            task = mt.task
            self.drops.export(task.dropped_by_operator(), mt.exported, task.late_example)

    def _on_ack_failure(self, tp: Hashable, error: BaseException) -> None:
        mt = self.tasks.for_partition(tp)  # type: ignore[arg-type]
        if mt is None or mt.id in self._failed:
            return
        self._failed.add(mt.id)
        self.metrics.task_failures.labels(type(error).__name__).inc()
        log.error("task %s failed: %s; it restarts from its last committed offset", mt.id, error)

    async def _restart_failed(self) -> None:
        if self.eos is not None:  # exactly-once: abort the open transaction; every running task restarts
            await self.eos.recover()
        consumer = self.consumer
        for tid in sorted(self._failed):
            mt = self.tasks.get(tid)
            self._failed.discard(tid)
            if mt is None:
                continue
            tps = set(mt.inputs)
            self._close_task(mt, "failed")
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
            self._open_task(tid, tps)

    # ---- rebalance callbacks ---------------------------------------------------------------------

    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        self._epoch += 1
        try:
            async with self.lock:
                affected = {mt for tp in revoked if (mt := self.tasks.for_partition(tp)) is not None}
                running = [mt for mt in affected if mt.state is TaskState.RUNNING and mt.id not in self._failed]
                if running and self.fatal is None:
                    await self.committer.commit_locked("revoke", final=True, tasks=running)
                for mt in sorted(affected, key=lambda m: m.id):
                    self._close_task(mt, "revoked")
                self.committer.forget(list(revoked))
            if revoked:
                log.info("revoked %d partition(s)", len(revoked))
        except Exception as exc:  # noqa: BLE001 - aiokafka would swallow it
            self._set_fatal(exc)

    async def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        self._epoch += 1
        try:
            assert self.plan is not None
            groups = group_by_task(assigned, self.plan.source_subtopology)
            for tid, tps in sorted(groups.items()):
                expected = {TopicPartition(t, tid.partition) for t in self._subtopology_sources[tid.subtopology]}
                if tps != expected:
                    log.warning("task %s got %s but reads %s: co-partitioned inputs split across members "
                                "(is another assignor configured?)", tid, sorted(tps), sorted(expected))
                if self.tasks.get(tid) is not None:
                    continue
                self._open_task(tid, tps)
            log.info("assigned %d partition(s): tasks %s", len(assigned),
                     ", ".join(str(t) for t in sorted(groups)) or "none")
        except Exception as exc:  # noqa: BLE001 - aiokafka would swallow it
            self._set_fatal(exc)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _serde_name(serde: Any) -> str | None:
    return None if serde is None else str(serde.name)


def _log_send_failure(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("a punctuation send failed: %r", fut.exception())

