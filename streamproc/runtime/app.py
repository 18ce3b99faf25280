"""``StreamApp``: a topology as a long-running Kafka service (its lifecycle, poll loop and policies).

::

    app = StreamApp(topology, Config(application_id="sessions", bootstrap_servers="localhost:9092"))
    await app.run()          # until app.request_stop() / await app.stop() / SIGTERM (CLI) / a fatal error

The app wires its parts and runs the loop; each part owns one responsibility:

* :class:`~streamproc.runtime.task_manager.TaskManager`: the tasks (create on assignment, restore,
  feed in timestamp order, fail and restart, close on revocation);
* :class:`~streamproc.runtime.commit.CommitSequence`: the one commit sequence (flush changelogs,
  make durable, commit offsets), whose middle step is at-least-once or exactly-once;
* :class:`~streamproc.runtime.producer.OutputProducer`: sends, and under exactly-once the Kafka
  transactions (``transactions.py``);
* :class:`~streamproc.runtime.restore.Restorer`, the input consumer, the delayed-ack service, the
  repartition purger, metrics.

Lifecycle (a :class:`~streamproc.runtime.service.Service` with ordered children): before the
children start, the topic plan is resolved (co-partitioning checked, ``topic_config`` and the
existing internal topics checked, missing output, repartition, changelog and dead-letter topics
created with the asked replication factor, waiting for brokers when too few are alive). Children
start in the order metrics -> producer -> acks (purgatory timer) -> purger -> restorer -> consumer
(joins the group) -> committer, and stop in reverse, after the app's own shutdown (final commit,
snapshots, close tasks), all within
``shutdown_timeout_ms``: the final commit gets at most half of it (a broker that is away makes it
give up: the uncommitted input is processed again at the next start), a child that does not stop
in time is closed without waiting.

Data flow, per loop: ``getmany`` -> each partition's records into its task's input buffer -> with
the processing lock held, every task processes what its buffer releases (``Task.process`` per
run of one partition's records, no ``await`` per record) -> the outputs leave as whole producer
batches, each batch's future attributed in the :class:`~streamproc.purgatory.AckTracker` to the
input partitions whose records it carries, at the first input offset of the round. A partition's
committable offset is therefore its lowest un-acknowledged input offset.

Rebalances (aiokafka's eager protocol, our own assignor: ``assignor.py``): on revoke, the tasks of
the revoked partitions are committed (``final``: every send waited for) and suspended (state kept
in memory for ``suspended_task_retention_ms``); on assignment, tasks are opened (a kept one
restores only its changelogs' tail, a new one all of them, then input resumes) and standby tasks
follow their changelogs. A batch fetched before a rebalance that started while the batch waited for the lock is
discarded: the revoke committed only what was processed, and the reassignment resets positions to
the committed offsets, so those records are fetched again (by whichever member owns them next).

Record errors follow the error policies (``error_policy.py``). Fatal errors (``fail`` policy, a
crashed component) stop the app without a final commit and are raised from :meth:`StreamApp.run`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
import uuid
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import InconsistentGroupProtocolError

from ..config import Config
from ..engine.error_policy import ErrorPolicy, RecordError, Stage, classify, dead_letter_headers
from ..engine.task import Task
from ..errors import StreamprocError, TopicSetupError
from .acks import InputProgress
from .assignor import TaskAssignor, TaskOwners
from .client_logs import limit_client_logs
from .commit import AtLeastOnceCommit, CommitMode, CommitSequence, TransactionalCommit
from .consumer import AckService, InputConsumer
from .drops import DropReporter
from .metrics import Metrics
from .producer import OutputProducer, SendBuffer, to_bytes
from .progress_log import ProgressLog
from .queries import QueryServer
from .restore import Restorer
from .service import Service
from .snapshot import Snapshots, save_on_shutdown
from .task_manager import TaskManager
from .tasks import TaskState
from .topic_admin import TopicAdmin
from .topics import RepartitionPurger, TopicPlan, apply_topic_config, check_existing_topics, plan_topics
from .transactions import EOS_PRODUCER_DEFAULTS, Transactions

__all__ = ["RecordError", "ShutdownTimeoutError", "StreamApp"]

log = logging.getLogger("streamproc.app")

#: How often wall-clock punctuation runs (none of the built-in operators needs it).
_PUNCTUATE_EVERY_S = 1.0
#: How long a stop request waits for the round of processing in progress before abandoning it (s).
_ROUND_GRACE_S = 2.0
#: Share of ``shutdown_timeout_ms`` the final commit (and snapshots) may use; the rest closes the clients.
_FINAL_COMMIT_SHARE = 0.5


class ShutdownTimeoutError(StreamprocError):
    """The graceful stop did not finish within ``shutdown_timeout_ms``."""


class _Listener(ConsumerRebalanceListener):
    def __init__(self, revoked: Any, assigned: Any) -> None:
        self._revoked = revoked
        self._assigned = assigned

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self._assigned(set(assigned))


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
        self.progress_log = ProgressLog(self.metrics, config.progress_log_interval_ms)
        # durability (docs/durability.md): local snapshots under state_dir; exactly-once transactions
        self.snapshots = Snapshots(config.state_dir, app_id) if config.state_dir else None
        eos = config.processing_guarantee == "exactly_once_v2"
        producer_config = dict(config.producer_config)
        #: this process in the group protocol (standbys are never placed on the active's process)
        self.process_id = config.group_instance_id or uuid.uuid4().hex[:16]
        if eos:
            # a stable name fences the previous incarnation's producer at once (its open transaction aborts)
            instance = self.snapshots.instance_id() if self.snapshots is not None else self.process_id
            producer_config = {**EOS_PRODUCER_DEFAULTS, **producer_config, "transactional_id": f"{app_id}-{instance}"}
        self.producer = OutputProducer(config.bootstrap_servers, producer_config, f"{app_id}-producer")
        self.acks = AckService(config.delivery_timeout_ms, self._on_ack_failure)
        self.progress = InputProgress(self.acks.tracker)
        self.restorer = Restorer(config.bootstrap_servers, f"{app_id}-restore", self.metrics,
                                 config.consumer_config, config.restore_log_interval_ms,
                                 isolation_level="read_committed" if eos else "read_uncommitted",
                                 snapshots=self.snapshots)
        self.tasks = TaskManager(topology, config, self.restorer, self.progress, self.metrics, self.drops,
                                 read_committed=eos)
        self.purger = RepartitionPurger(config.bootstrap_servers, f"{app_id}-purger",
                                        config.repartition_purge_interval_ms)
        mode: CommitMode
        if self.producer.transactions is not None:
            self.producer.transactions.on_abort = self.tasks.fail_running
            self.producer.transactions.on_fatal = self._set_fatal
            mode = TransactionalCommit(self.producer.transactions, self.tasks, app_id)
        else:
            mode = AtLeastOnceCommit(lambda: self.consumer, self.producer)
        self.committer = CommitSequence(mode, self.tasks, self.producer, self.progress, self.metrics, self.lock,
                                        lambda: self.consumer, self.purger.committed, config.commit_interval_ms,
                                        config.delivery_timeout_ms, config.shutdown_timeout_ms)
        self.input: InputConsumer | None = None
        self.assignor: TaskAssignor | None = None
        #: interactive queries over HTTP (``query_port``; docs/queries.md)
        self.queries = QueryServer(_QueryView(self), config.query_host, config.query_port) \
            if config.query_port else None
        self.plan: TopicPlan | None = None
        #: sub-topologies that write repartition topics (their tasks are kept in step, task_manager.py)
        self._repartition_writers: frozenset[int] = frozenset()
        self.fatal: BaseException | None = None
        self._epoch = 0
        self._stop_requested = False
        self._stop_requested_at: float | None = None
        self._deadline: float | None = None
        self._stop_event = asyncio.Event()
        #: the stop interrupted a round of processing (its effects are in the stores, not committed)
        self._interrupted = False
        self._running = False
        self._run_done: asyncio.Event | None = None
        self._last_punctuate = 0.0
        self._error_policy = {
            Stage.DESERIALIZATION: ErrorPolicy(config.deserialization_error_policy),
            Stage.PROCESSING: ErrorPolicy(config.processing_error_policy),
        }

    # ---- lifecycle -------------------------------------------------------------------------------

    @property
    def eos(self) -> Transactions | None:
        """The producer's transactions under exactly-once, else None."""
        return self.producer.transactions

    def children(self) -> Sequence[Service]:
        kids: list[Service] = [self.metrics, self.producer, self.acks, self.purger, self.restorer]
        if self.queries is not None:
            kids.append(self.queries)
        if self.input is not None:
            kids.append(self.input)
        kids.append(self.committer)
        return kids

    @property
    def consumer(self) -> Any:
        assert self.input is not None and self.input.consumer is not None, "app not started"
        return self.input.consumer

    async def start(self) -> None:
        limit_client_logs()
        if self.plan is None:
            await self._prepare_topics()
            if self.plan is None:  # a stop was requested while waiting for brokers: nothing to start
                return
        if self.snapshots is not None and not self._started:
            self.snapshots.lock()
        try:
            await super().start()
        except BaseException:
            if self.snapshots is not None:
                self.snapshots.unlock()
            raise
        self.tasks.configure(self.consumer, self._subtopology_sources(), aligned=self._repartition_writers)

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
                if self.started:
                    await self._run_loop()
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                self._set_fatal(exc)
            # the deadline counts from the stop request (a fatal error: from now)
            self._deadline = (self._stop_requested_at or time.monotonic()) + self.config.shutdown_timeout_ms / 1000
            try:
                await asyncio.wait_for(Service.stop(self, self._deadline), self.config.shutdown_timeout_ms / 1000 + 5)
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
            self._stop_requested_at = time.monotonic()
        self._stop_requested = True
        self._stop_event.set()

    async def _run_loop(self) -> None:
        """The processing loop until a stop is requested. A round that does not finish within
        :data:`_ROUND_GRACE_S` of the request (its sends wait for brokers that are away) is
        interrupted: its records were not committed, so they are processed again at the next start;
        under exactly-once the open transaction is then not committed at shutdown."""
        loop = asyncio.ensure_future(self._process_loop())
        stop = asyncio.ensure_future(self._stop_event.wait())
        try:
            await asyncio.wait({loop, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not loop.done():
                grace = min(_ROUND_GRACE_S, self.config.shutdown_timeout_ms / 4000)
                done, _ = await asyncio.wait({loop}, timeout=grace)
                if not done:
                    loop.cancel()
                    self._interrupted = True
                    log.warning("the round in progress did not finish within %.1f s of the stop request (brokers "
                                "away?): it is abandoned, its records are processed again at the next start", grace)
                    with contextlib.suppress(asyncio.CancelledError):
                        await loop
                    return
            loop.result()
        finally:
            stop.cancel()

    async def stop(self, deadline: float | None = None) -> None:
        """Stop gracefully: when :meth:`run` is active, request a stop and wait for it to finish."""
        if self._running and self._run_done is not None:
            self.request_stop()
            await self._run_done.wait()
            return
        await super().stop(deadline)

    async def on_stop(self) -> None:
        self._stop_requested = True
        if self.fatal is None and self.input is not None and self.input.started:
            left = self.config.shutdown_timeout_ms / 1000 if self._deadline is None else \
                self._deadline - time.monotonic()
            budget = max(0.0, left * _FINAL_COMMIT_SHARE)
            try:
                await asyncio.wait_for(self._final_commit(), budget)
            except TimeoutError:
                log.warning("final commit not done within %.1f s (half of what is left of shutdown_timeout_ms; are "
                            "the brokers reachable?): the input processed since the last commit is processed again "
                            "at the next start", budget)
        self.tasks.close_all("shutdown")
        self.drops.flush()
        if self.snapshots is not None:
            self.snapshots.unlock()

    async def _final_commit(self) -> None:
        if self._interrupted and self.eos is not None:
            log.warning("exactly-once: the interrupted round's transaction is not committed (it is aborted); "
                        "processing resumes from the last committed offsets")
            return
        async with self.lock:
            if self.tasks.running():
                await self.committer.commit_locked("shutdown", final=True)
            if self.snapshots is not None and self.fatal is None:
                try:
                    await save_on_shutdown(self.tasks.runnable(), self.progress.tracker, self.config,
                                           self.snapshots)
                except Exception as exc:
                    log.warning("snapshots not written: %s: %s", type(exc).__name__, exc)

    def _set_fatal(self, exc: BaseException) -> None:
        if self.fatal is None:
            self.fatal = exc
            # run() raises it and the caller reports it once (the CLI: one ERROR line, exit 1; a usage
            # error such as TopicSetupError: exit 2)
            log.debug("fatal: %s: %s", type(exc).__name__, exc)
        self._stop_requested = True
        self._stop_event.set()

    # ---- topics ----------------------------------------------------------------------------------

    async def _prepare_topics(self) -> None:
        """Resolve the topic plan, check the existing topics and create the missing ones.

        Raises :class:`TopicSetupError` (the CLI exits 2) when ``topic_config`` would change a config
        an internal topic needs or an existing topic does not fit (one line each), and
        :class:`TopologyError` for sources that are missing or not co-partitioned; both before any
        client starts. Leaves :attr:`plan` None when a stop was requested while it waited for
        brokers to create topics.
        """
        from ..stores import changelog_topic_config

        cfg = self.config
        app_id = cfg.application_id
        admin = TopicAdmin(cfg.bootstrap_servers, f"{app_id}-admin")
        existing = await admin.partition_counts()
        subs = []
        changelog_configs: dict[str, dict[str, str]] = {}
        changelog_stores: dict[str, str] = {}
        for st in self.topology.subtopologies_for(app_id):
            probe = Task(self.topology, st.id, 0, app_id, changelog=cfg.changelog_enabled)
            try:
                for name, topic in probe.changelog_topics.items():
                    changelog_configs[topic] = changelog_topic_config(probe.stores[name])
                    changelog_stores[topic] = _store_label(name, probe.stores[name])
                changelogs = dict(probe.changelog_topics)
            finally:
                probe.close()
            key_serdes = {t: _serde_name(self.topology.source_serdes(t, app_id)[0]) for t in st.source_topics}
            subs.append(SimpleNamespace(id=st.id, source_topics=st.source_topics, sink_topics=st.sink_topics,
                                        repartition_topics=st.repartition_topics, changelog_topics=changelogs,
                                        key_serdes=key_serdes))
        uses_dlq = ErrorPolicy.DEAD_LETTER in self._error_policy.values()
        try:
            plan = plan_topics(subs, existing, changelog_configs, cfg.dead_letter_topic if uses_dlq else None,
                               changelog_stores)
        except TopicSetupError as exc:
            raise TopicSetupError(f"{exc} (cluster at {cfg.bootstrap_servers})") from None
        problems: list[str] = []
        try:
            apply_topic_config(plan, cfg.topic_config)
        except TopicSetupError as exc:
            problems.append(str(exc))
        factor: int | None = cfg.replication_factor
        how = ""
        if cfg.replication_factor < 0:
            factor = (await admin.cluster()).default_replication_factor
            how = "replication_factor=-1: the cluster's default.replication.factor"
        errors, warnings = check_existing_topics(plan, await admin.describe(t for t in plan.outputs if t in existing),
                                                 factor, how)
        for line in warnings:
            log.warning("%s", line)
        problems += errors
        if problems:
            raise TopicSetupError("\n".join(problems))
        missing = plan.missing(existing)
        if missing:
            if not cfg.create_topics:
                raise StreamprocError(
                    f"topics {[s.name for s in missing]} do not exist and create_topics is off; create them "
                    f"(partitions: {', '.join(f'{s.name}={s.partitions}' for s in missing)})")
            if factor is None:
                raise StreamprocError(
                    "replication_factor=-1 asks for the cluster's default.replication.factor, but it could not be "
                    "read from the brokers (DescribeConfigs not allowed?); set replication_factor to a positive number")
            log.info("creating %d topic(s) with replication factor %d%s", len(missing), factor,
                     f" ({how})" if how else "")
            if not await admin.create(missing, factor, wait_s=cfg.topic_creation_timeout_ms / 1000, how=how,
                                      stop=self._stop_event):
                return
        self.plan = plan
        for sid, sources in sorted(self._subtopology_sources().items()):
            log.info("sub-topology %d: %d task(s), sources %s", sid, plan.subtopology_partitions[sid], sorted(sources))
        self.producer.partition_counts = plan.partition_counts()
        self.purger.topics = frozenset(t for st in subs for t in st.repartition_topics)
        self._repartition_writers = frozenset(st.id for st in subs if set(st.sink_topics) & self.purger.topics)
        consumer_config = dict(cfg.consumer_config)
        if self.eos is not None:  # exactly-once: never read records of open or aborted transactions
            consumer_config["isolation_level"] = "read_committed"
        if cfg.group_instance_id:
            consumer_config["group_instance_id"] = cfg.group_instance_id
        self.assignor = TaskAssignor(self.process_id, cfg.advertised_server, plan.source_subtopology,
                                     {st.id for st in subs if st.changelog_topics}, cfg.num_standby_replicas,
                                     self.tasks.local_state)
        self.input = InputConsumer(cfg.bootstrap_servers, app_id, f"{app_id}-consumer", plan.source_topics,
                                   _Listener(self._on_revoked, self._on_assigned), cfg.auto_offset_reset,
                                   cfg.max_poll_records, consumer_config, self.assignor)

    def _subtopology_sources(self) -> dict[int, set[str]]:
        assert self.plan is not None
        out: dict[int, set[str]] = {}
        for topic, sid in self.plan.source_subtopology.items():
            out.setdefault(sid, set()).add(topic)
        return out

    # ---- the processing loop ---------------------------------------------------------------------

    async def _process_loop(self) -> None:
        cfg = self.config
        consumer = self.consumer
        tasks = self.tasks
        while not self._stop_requested:
            self._check_components()
            if tasks.failed:
                async with self.lock:
                    await self._restart_failed()
            if len(tasks) and time.monotonic() - self._last_punctuate >= _PUNCTUATE_EVERY_S:
                async with self.lock:
                    await self._punctuate()
            tasks.expire_suspended()
            self.progress_log.tick()
            try:
                batch = await consumer.getmany(timeout_ms=tasks.poll_timeout_ms(cfg.poll_timeout_ms),
                                               max_records=cfg.max_poll_records)
            except InconsistentGroupProtocolError:
                raise StreamprocError(
                    f"consumer group {cfg.application_id!r} has members that do not speak streamproc's group "
                    f"protocol (an older streamproc version, which used Kafka's range assignor, or another "
                    f"client): stop them before starting this version (docs/production.md)") from None
            epoch = self._epoch  # the records belong to the assignment current at return
            async with self.lock:
                if epoch != self._epoch:
                    if batch:
                        log.debug("discarding a batch fetched before a rebalance (it is fetched again)")
                    continue
                if batch:
                    tasks.buffer(batch)
                await self._process_ready()
        self._check_components()

    def _check_components(self) -> None:
        if self.fatal is not None:
            raise self.fatal
        for child in self.children():
            if child.crash is not None:
                raise StreamprocError(f"{child.label} failed: {type(child.crash).__name__}: {child.crash}") \
                    from child.crash

    async def _process_ready(self) -> None:
        """Run what the tasks' input buffers release, send the outputs, register the round."""
        buf = self.producer.buffer()
        done = await self.tasks.process_ready(buf, self._record_error)
        if not done.firsts:
            return
        sent = await buf.flush() if len(buf) else []
        self.progress.processed(done.firsts, done.lasts, sent)
        metrics = self.metrics
        for topic, n in done.out_counts.items():
            metrics.records_out.labels(topic).inc(n)
        metrics.pending_acks.set(self.progress.tracker.pending_sends())

    def _record_error(self, exc: Exception, tp: TopicPartition, rec: Any, buf: SendBuffer,
                      released: bool = False) -> None:
        """Apply the error policy of ``exc``'s stage to record ``rec``: one fetched from ``tp``, or
        (``released``) one a join released from its buffer while a record of ``tp`` was processed.
        ``rec`` names its own position (``topic``, ``partition``, ``offset``; all None for an
        origin restored from an older changelog format) and carries its bytes and headers; a dead
        letter's ack is attributed to ``tp``, whose record caused it."""
        stage = classify(exc)
        policy = self._error_policy[stage]
        topic, partition = (rec.topic, rec.partition) if released else (tp.topic, tp.partition)
        where = f"{topic}[{partition}]@{rec.offset}" if topic is not None else "(position unknown: buffered " \
            "before this version kept positions)"
        if released:
            where += f", released from a join buffer while {tp.topic}[{tp.partition}] was processed"
        reason = getattr(exc, "reason", None) or str(exc)  # without the position: it is named once, here
        if policy is ErrorPolicy.FAIL:
            setting = f"{stage.value}_error_policy"
            raise RecordError(
                f"{stage.value} error on record {where}: {type(exc).__name__}: {reason} "
                f"({setting}=fail; set it to skip or dead-letter to go on)") from exc
        if policy is ErrorPolicy.SKIP:
            self.drops.add(getattr(exc, "operator", None) or tp.topic, f"{stage.value}_error")
            log.warning("skipped record %s (%s error, %s: %s)", where, stage.value, type(exc).__name__, reason)
            return
        dlq = self.config.dead_letter_topic
        headers = dead_letter_headers(rec.headers, exc, stage, topic if topic is not None else "",
                                      partition if partition is not None else -1,
                                      rec.offset if rec.offset is not None else -1)
        key = rec.key if rec.key is None or type(rec.key) is bytes else to_bytes(rec.key, "dead letter key")
        value = rec.value if rec.value is None or type(rec.value) is bytes else to_bytes(rec.value, "dead letter")
        buf.add(dlq, key, value, rec.timestamp if rec.timestamp >= 0 else None, headers, source=tp)
        self.metrics.dead_lettered.labels(stage.value, getattr(exc, "operator", None) or tp.topic).inc()
        log.warning("dead-lettered record %s to %s (%s error, %s: %s)", where, dlq, stage.value,
                    type(exc).__name__, reason)

    async def _punctuate(self) -> None:
        self._last_punctuate = time.monotonic()
        now_ms = int(time.time() * 1000)
        buf = self.producer.buffer()
        for mt in self.tasks.runnable():
            mt.task.punctuate_wall_clock(now_ms)
            for out in mt.task.drain_outputs():
                buf.add(out.topic, to_bytes(out.key, "key"), to_bytes(out.value, "value"), out.timestamp,
                        out.headers)
        if len(buf):
            for fut, _ in await buf.flush():
                fut.add_done_callback(_log_send_failure)

    # ---- failures --------------------------------------------------------------------------------

    def _on_ack_failure(self, tp: Any, error: BaseException) -> None:
        self.tasks.fail(tp, error)

    async def _restart_failed(self) -> None:
        """Exactly-once: abort the open transaction first (every running task restarts); while the
        brokers are away that waits, and is tried again at the next loop."""
        if self.eos is not None and not await self.eos.recover():
            return
        await self.tasks.restart_failed()

    # ---- rebalance callbacks ---------------------------------------------------------------------

    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        self._epoch += 1
        started = time.monotonic()
        try:
            async with self.lock:
                affected = self.tasks.affected(revoked)
                runnable = set(self.tasks.runnable())
                running = [mt for mt in affected if mt in runnable]
                committed: list[Any] = []
                if running and self.fatal is None:
                    await self.committer.commit_locked("revoke", final=True, tasks=running)
                    committed = running
                await self.tasks.revoke(affected, committed)
                self.committer.forget(list(revoked))
            if revoked:
                log.info("revoked %d partition(s) in %.2f s", len(revoked), time.monotonic() - started)
        except Exception as exc:
            self._set_fatal(exc)

    async def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        self._epoch += 1
        self.metrics.rebalances.inc()
        try:
            assert self.assignor is not None
            self.tasks.assign(assigned, standby=self.assignor.view.standby)
        except Exception as exc:
            self._set_fatal(exc)
            return
        self.add_background(self.tasks.report_initial_lag(assigned), "initial-lag")


def _store_label(name: str, store: Any) -> str:
    """``key-value store 'counts'``: a store as topic messages name it."""
    kind = getattr(getattr(store, "inner", store), "kind", None)
    return f"{str(kind).replace('_', '-')} store {name!r}" if kind else f"store {name!r}"


def _serde_name(serde: Any) -> str | None:
    return None if serde is None else str(serde.name)


def _log_send_failure(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("a punctuation send failed: %r", fut.exception())


class _QueryView:
    """What the query server asks the app (:class:`~streamproc.runtime.queries.QueryBackend`)."""

    def __init__(self, app: StreamApp) -> None:
        self._app = app

    @property
    def application_server(self) -> str:
        return self._app.config.advertised_server

    @property
    def topology(self) -> Any:
        return self._app.topology

    @property
    def application_id(self) -> str:
        return self._app.config.application_id

    def task_partitions(self, subtopology: int) -> int | None:
        plan = self._app.plan
        return None if plan is None else plan.subtopology_partitions.get(subtopology)

    def owners(self, task: Any) -> TaskOwners:
        assignor = self._app.assignor
        return TaskOwners(None) if assignor is None else assignor.view.owners_of(task)

    def local_task(self, task: Any) -> tuple[str, Any] | None:
        mt = self._app.tasks.get(task)
        if mt is None:
            return None
        running = mt.state is TaskState.RUNNING and mt.id not in self._app.tasks.failed
        return ("running" if running else "restoring"), mt.task
