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
from the beginning, since in-memory stores have no checkpoint. Progress is logged per changelog
partition every ``log_interval_ms`` (offset, end, remaining) and exported as the
``streamproc_restore_remaining_records`` gauge.
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


@dataclass
class RestoreJob:
    """The changelog partitions of one task and what to call when they are all replayed."""

    key: Hashable
    partitions: dict[TopicPartition, _Partition]
    on_done: Callable[[], None]
    started: float = field(default_factory=time.monotonic)
    prepared: bool = False


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

    def add(self, key: Hashable, stores: Mapping[TopicPartition, Any], on_done: Callable[[], None]) -> None:
        """Restore ``stores`` (changelog partition -> change-logging store), then call ``on_done``."""
        if key in self._jobs:
            raise ValueError(f"task {key} is already restoring")
        parts = {tp: _Partition(tp, store) for tp, store in stores.items()}
        self._jobs[key] = RestoreJob(key, parts, on_done)
        self._wakeup.set()

    def remove(self, key: Hashable) -> bool:
        """Forget ``key``'s restoration (its partitions were revoked); True if it was restoring."""
        job = self._jobs.pop(key, None)
        if job is None:
            return False
        for p in job.partitions.values():
            self._metrics.restore_remaining.labels(p.tp.topic, str(p.tp.partition)).set(0)
        log.info("restoration of task %s abandoned (partitions revoked)", key)
        return True

    def restoring(self, key: Hashable) -> bool:
        return key in self._jobs

    @property
    def pending(self) -> int:
        return len(self._jobs)

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
                    if p.position >= p.end:
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
            for tp, p in job.partitions.items():
                p.end = ends[tp]
                p.position = begins[tp]
                if self._snapshots is not None:  # a valid local snapshot: replay only the tail
                    p.position = await self._snapshots.load(job.key, tp, p.store, begins[tp], ends[tp])
                    if self._jobs.get(job.key) is not job:
                        break
            if self._jobs.get(job.key) is not job:
                continue
            for tp, p in job.partitions.items():
                p.done = p.position >= p.end
                remaining = max(0, p.end - p.position)
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

    def _report(self) -> None:
        now = time.monotonic()
        if now - self._last_log < self._log_interval:
            return
        self._last_log = now
        for job in self._jobs.values():
            if now - job.started < self._log_interval:  # the first line after one interval, with a real rate
                continue
            for tp, p in job.partitions.items():
                if job.prepared and not p.done:
                    rate = p.restored / max(now - job.started, 1e-3)
                    log.info("task %s: restoring %s[%d]: offset %d, end %d, remaining %d, rate %.0f records/s",
                             job.key, tp.topic, tp.partition, p.position, p.end, max(0, p.end - p.position), rate)

    def _complete_finished(self) -> None:
        for key, job in list(self._jobs.items()):
            if job.prepared and all(p.done for p in job.partitions.values()):
                del self._jobs[key]
                total = sum(p.restored for p in job.partitions.values())
                for p in job.partitions.values():
                    self._metrics.restore_remaining.labels(p.tp.topic, str(p.tp.partition)).set(0)
                log.info("task %s: restored %d changelog records from %d partitions in %.2f s", key, total,
                         len(job.partitions), time.monotonic() - job.started)
                job.on_done()
