"""Restoration of a task's stores from their changelog partitions (docs/durability.md).

The :class:`Restorer` owns a *restore consumer*: an aiokafka consumer outside the consumer group
(``group_id=None``), driven with ``assign``/``seek``. For every task handed to :meth:`Restorer.add`
it reads, once, the end offset of each of the task's changelog partitions, then replays each
partition from its beginning up to that end offset through the change-logging wrapper's
``restore()`` (the store's own put rules). Records at or past the end offset read at the start are
not applied. When all partitions of a task reached their end offset, the task's ``on_done``
callback runs (the app then resumes the task's input partitions, which were paused meanwhile).

Several tasks restore at once, through the same consumer. :meth:`remove` forgets a task (its
partitions were revoked mid-restore); a later :meth:`add` for the same partitions starts over
from the beginning. Progress is logged per changelog partition every ``log_interval_ms`` (offset,
end, remaining) and exported as the ``streamproc_restore_remaining_records`` gauge.

**From an offset.** ``add(..., start={tp: offset})`` replays only ``[offset, end)``: the stores
already hold the changelog below ``offset`` (a task kept in memory since a rebalance, or a
standby). An offset outside ``[log start, end]`` (records deleted by retention, the topic
recreated) cannot be continued from: the job is dropped and ``on_invalid(reason)`` is called (the
task manager then restores a fresh task from the beginning).

**Following** (standby tasks): :meth:`follow` applies every record of the partitions as it is
written, without end; :meth:`unfollow` stops and returns the next offset of each partition, from
which an :meth:`add` continues. The standby's distance to the log end is the
``streamproc_standby_lag`` gauge.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from .consumer import stop_consumer
from .metrics import Metrics
from .service import Service

__all__ = ["RestoreJob", "Restorer"]

log = logging.getLogger(__name__)


@dataclass
class _Partition:
    tp: TopicPartition
    store: Any  # a ChangeLogging*Store: .restore(Iterable[ChangelogRecord])
    end: int = -1
    position: int = -1
    restored: int = 0
    done: bool = False
    #: a standby's partition: every record is applied, it is never done
    follow: bool = False


@dataclass
class RestoreJob:
    """The changelog partitions of one task and what to call when they are all replayed."""

    key: Hashable
    partitions: dict[TopicPartition, _Partition]
    on_done: Callable[[], None]
    started: float = field(default_factory=time.monotonic)
    prepared: bool = False
    #: where to start per partition (the stores hold everything below); None: the beginning
    start: Mapping[TopicPartition, int] | None = None
    #: called with the reason when ``start`` cannot be continued from (the job is dropped)
    on_invalid: Callable[[str], None] | None = None
    #: a standby's job: applies records as they come, never done
    follow: bool = False


class Restorer(Service):
    """Replays changelog partitions into stores with a consumer outside the group."""

    label = "restorer"

    def __init__(self, bootstrap_servers: str, client_id: str, metrics: Metrics,
                 consumer_overrides: Mapping[str, Any] | None = None, log_interval_ms: int = 2000,
                 max_records: int = 10_000, isolation_level: str = "read_uncommitted",
                 snapshots: Any = None) -> None:
        super().__init__()
        #: ``read_committed`` under exactly-once: records of aborted transactions are not replayed
        self._isolation_level = isolation_level
        #: a :class:`~streamproc.runtime.snapshot.Snapshots` (``load`` gives the offset to start from)
        self._snapshots = snapshots
        self._bootstrap = bootstrap_servers
        self._client_id = client_id
        self._overrides = dict(consumer_overrides or {})
        self._metrics = metrics
        self._log_interval = log_interval_ms / 1000
        self._max_records = max_records
        self._jobs: dict[Hashable, RestoreJob] = {}
        self._wakeup = asyncio.Event()
        self._consumer: AIOKafkaConsumer | None = None
        self._assigned: frozenset[TopicPartition] = frozenset()
        #: the partition (job) the consumer's position of each assigned changelog partition belongs to
        self._positioned: dict[TopicPartition, _Partition] = {}
        self._last_log = 0.0

    # ---- API ---------------------------------------------------------------------------------

    def add(self, key: Hashable, stores: Mapping[TopicPartition, Any], on_done: Callable[[], None],
            start: Mapping[TopicPartition, int] | None = None,
            on_invalid: Callable[[str], None] | None = None) -> None:
        """Restore ``stores`` (changelog partition -> change-logging store), then call ``on_done``.
        With ``start``, only the records from those offsets on (see the module docstring)."""
        self._add(RestoreJob(key, {tp: _Partition(tp, store) for tp, store in stores.items()}, on_done,
                             start=start, on_invalid=on_invalid))

    def follow(self, key: Hashable, stores: Mapping[TopicPartition, Any],
               start: Mapping[TopicPartition, int] | None = None,
               on_invalid: Callable[[str], None] | None = None) -> None:
        """Keep ``stores`` up to date with their changelog partitions (a standby), from ``start``
        (None: the beginning), until :meth:`unfollow`."""
        self._add(RestoreJob(key, {tp: _Partition(tp, store) for tp, store in stores.items()}, lambda: None,
                             start=start, on_invalid=on_invalid, follow=True))

    def _add(self, job: RestoreJob) -> None:
        if job.key in self._jobs:
            raise ValueError(f"task {job.key} is already restoring")
        self._jobs[job.key] = job
        self._wakeup.set()

    def unfollow(self, key: Hashable) -> dict[TopicPartition, int] | None:
        """Stop following ``key``; the next offset of each of its changelog partitions (what the
        stores hold lies below), or None when it had not started (the stores are as given)."""
        job = self._jobs.get(key)
        if job is None or not job.follow:
            return None
        del self._jobs[key]
        for p in job.partitions.values():
            self._metrics.standby_lag.labels(p.tp.topic, str(p.tp.partition)).set(0)
        if not job.prepared:
            return dict(job.start) if job.start is not None else None
        return {tp: p.position for tp, p in job.partitions.items()}

    def remove(self, key: Hashable) -> bool:
        """Forget ``key``'s restoration (its partitions were revoked) or standby; True if it had one."""
        job = self._jobs.pop(key, None)
        if job is None:
            return False
        for p in job.partitions.values():
            self._metrics.restore_remaining.labels(p.tp.topic, str(p.tp.partition)).set(0)
            if job.follow:
                self._metrics.standby_lag.labels(p.tp.topic, str(p.tp.partition)).set(0)
        if not job.follow:
            log.info("restoration of task %s abandoned (partitions revoked)", key)
        return True

    def restoring(self, key: Hashable) -> bool:
        job = self._jobs.get(key)
        return job is not None and not job.follow

    @property
    def pending(self) -> int:
        return sum(1 for job in self._jobs.values() if not job.follow)

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The end offsets of ``tps`` as this consumer reads them (the last stable offset under
        ``read_committed``)."""
        if not tps:
            return {}
        assert self._consumer is not None, "restorer not started"
        return dict(await self._consumer.end_offsets(tps))

    # ---- lifecycle -----------------------------------------------------------------------------

    async def on_start(self) -> None:
        kwargs = {k: v for k, v in self._overrides.items()
                  if k not in ("group_instance_id", "isolation_level", "max_poll_records")}
        self._consumer = AIOKafkaConsumer(bootstrap_servers=self._bootstrap, client_id=self._client_id,
                                          group_id=None, enable_auto_commit=False,
                                          auto_offset_reset="earliest", isolation_level=self._isolation_level,
                                          **kwargs)
        await self._consumer.start()
        self.add_background(self._run(), "restore-loop")

    async def on_stop(self) -> None:
        await self._cancel_background()
        if self._consumer is not None:
            await stop_consumer(self._consumer)

    # ---- the loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while True:
            if not self._jobs:
                if self._assigned:
                    consumer.assign([])
                    self._assigned = frozenset()
                    self._positioned = {}
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            await self._prepare_new_jobs(consumer)
            active = self._active_partitions()
            if not active:
                await asyncio.sleep(0)
                continue
            if frozenset(active) != self._assigned:
                consumer.assign(list(active))
                self._assigned = frozenset(active)
                self._positioned = {}
            for tp, p in active.items():
                # a new job for a partition already assigned (its task was restarted, or revoked and
                # assigned again) starts at its own position, not where the previous job stopped
                if self._positioned.get(tp) is not p:
                    consumer.seek(tp, p.position)
                    self._positioned[tp] = p
            batch = await consumer.getmany(timeout_ms=200, max_records=self._max_records)
            for tp, records in batch.items():
                part = active.get(tp)
                if part is None or part.done or not self._owned(part):
                    continue
                self._apply(part, records)
            # getmany returns buffered records without suspending: yield, or a long restore starves
            # the loop (heartbeats, rebalances, the processing loop) until it ends
            await asyncio.sleep(0)
            for tp, p in active.items():
                if not p.done and self._owned(p):
                    pos = await consumer.position(tp)
                    p.position = max(p.position, pos)
                    if p.follow:
                        self._report_standby(consumer, p)
                    elif p.position >= p.end:
                        p.done = True
            self._report()
            self._complete_finished()

    def _owned(self, p: _Partition) -> bool:
        return any(job.partitions.get(p.tp) is p for job in self._jobs.values())

    async def _prepare_new_jobs(self, consumer: AIOKafkaConsumer) -> None:
        fresh = [job for job in self._jobs.values() if not job.prepared]
        if not fresh:
            return
        tps = [tp for job in fresh for tp in job.partitions]
        ends = await consumer.end_offsets(tps) if tps else {}
        begins = await consumer.beginning_offsets(tps) if tps else {}
        for job in fresh:
            if self._jobs.get(job.key) is not job:
                continue  # removed while we awaited
            if job.start is not None:
                bad = [f"{tp.topic}[{tp.partition}]: offset {job.start[tp]} is outside the changelog's "
                       f"[{begins[tp]}, {ends[tp]}]" for tp in job.partitions
                       if tp not in job.start or not begins[tp] <= job.start[tp] <= ends[tp]]
                if bad:
                    del self._jobs[job.key]
                    reason = "; ".join(bad)
                    log.warning("task %s: cannot continue its kept state from where it was (%s); it is restored "
                                "from the beginning", job.key, reason)
                    if job.on_invalid is not None:
                        job.on_invalid(reason)
                    continue
            for tp, p in job.partitions.items():
                p.end = ends[tp]
                p.follow = job.follow
                if job.start is not None:
                    p.position = job.start[tp]
                    continue
                p.position = begins[tp]
                if self._snapshots is not None and not job.follow:  # a valid snapshot: replay only the tail
                    p.position = await self._snapshots.load(job.key, tp, p.store, begins[tp], ends[tp])
                    if self._jobs.get(job.key) is not job:
                        break
            if self._jobs.get(job.key) is not job:
                continue
            for tp, p in job.partitions.items():
                remaining = max(0, p.end - p.position)
                if job.follow:
                    self._metrics.standby_lag.labels(tp.topic, str(tp.partition)).set(remaining)
                    log.info("task %s: standby follows %s[%d] from offset %d (end %d)", job.key, tp.topic,
                             tp.partition, p.position, p.end)
                    continue
                p.done = p.position >= p.end
                self._metrics.restore_remaining.labels(tp.topic, str(tp.partition)).set(remaining)
                log.info("task %s: restoring %s[%d] from offset %d to end %d (%d remaining)", job.key,
                         tp.topic, tp.partition, p.position, p.end, remaining)
            job.prepared = True
        self._complete_finished()

    def _active_partitions(self) -> dict[TopicPartition, _Partition]:
        out: dict[TopicPartition, _Partition] = {}
        for job in self._jobs.values():
            if not job.prepared:
                continue
            for tp, p in job.partitions.items():
                if not p.done:
                    out[tp] = p
        return out

    def _apply(self, p: _Partition, records: list[Any]) -> None:
        from ..stores import ChangelogRecord  # the stores package is owned by the stores helper

        if p.follow:  # a standby applies everything (and does not count as a restore)
            todo = [ChangelogRecord(r.key, r.value, r.timestamp) for r in records]
            if todo:
                p.store.restore(todo)
                self._metrics.standby_records.labels(p.tp.topic).inc(len(todo))
            if records:
                p.position = max(p.position, records[-1].offset + 1)
            return
        todo = [ChangelogRecord(r.key, r.value, r.timestamp) for r in records if r.offset < p.end]
        if todo:
            p.store.restore(todo)
            p.restored += len(todo)
            self._metrics.restored.labels(p.tp.topic).inc(len(todo))
        if records:
            p.position = max(p.position, records[-1].offset + 1)
        self._metrics.restore_remaining.labels(p.tp.topic, str(p.tp.partition)).set(max(0, p.end - p.position))
        if p.position >= p.end:
            p.done = True

    def _report_standby(self, consumer: AIOKafkaConsumer, p: _Partition) -> None:
        """``streamproc_standby_lag``: the log end (last stable offset under read_committed) minus
        the standby's next offset."""
        end = consumer.last_stable_offset(p.tp) if self._isolation_level == "read_committed" else None
        if end is None or end < 0:
            end = consumer.highwater(p.tp)
        if end is not None:
            p.end = max(p.end, end)
        self._metrics.standby_lag.labels(p.tp.topic, str(p.tp.partition)).set(max(0, p.end - p.position))

    def _report(self) -> None:
        now = time.monotonic()
        if now - self._last_log < self._log_interval:
            return
        self._last_log = now
        for job in self._jobs.values():
            if now - job.started < self._log_interval:  # the first line after one interval, with a real rate
                continue
            for tp, p in job.partitions.items():
                if job.prepared and not p.done and not job.follow:
                    rate = p.restored / max(now - job.started, 1e-3)
                    log.info("task %s: restoring %s[%d]: offset %d, end %d, remaining %d, rate %.0f records/s",
                             job.key, tp.topic, tp.partition, p.position, p.end, max(0, p.end - p.position), rate)

    def _complete_finished(self) -> None:
        for key, job in list(self._jobs.items()):
            if job.prepared and not job.follow and all(p.done for p in job.partitions.values()):
                del self._jobs[key]
                total = sum(p.restored for p in job.partitions.values())
                for p in job.partitions.values():
                    self._metrics.restore_remaining.labels(p.tp.topic, str(p.tp.partition)).set(0)
                log.info("task %s: restored %d changelog records from %d partitions in %.2f s", key, total,
                         len(job.partitions), time.monotonic() - job.started)
                job.on_done()
