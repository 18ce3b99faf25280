"""The commit sequence, written once for both guarantees (docs/semantics.md, "Commits").

:meth:`CommitSequence.commit_locked` is the only place input offsets are committed:

1. **Flush store writes to the changelog**: each target task's change-logging stores are drained
   (``Task.drain_changelogs()``, de-duplicated per key by the wrappers) and sent to partition
   ``task.partition`` of each changelog topic. The sends are registered with the ack tracker on
   each input partition of the task, at the first input offset processed since the previous flush
   (so no offset whose state change they carry becomes committable before they land). Per input
   partition, how far processing had got is the commit's *cap*.
2. **Make everything durable**, the step where the guarantees differ (:class:`CommitMode`):
   at-least-once waits for those changelog sends (on revocation and shutdown for every pending
   send); exactly-once waits for every send of the open transaction.
3. **Commit offsets**: for each input partition of a running, non-failed target task, the ack
   tracker's committable offset (the lowest un-acknowledged input offset, never past a gap, never
   past the cap), when it moved since the last commit. At-least-once commits them with the group
   consumer; exactly-once writes them into the transaction and commits it.

A send that fails or times out fails its task (through the tracker, or the transaction); its
partitions are not committed. On revocation and shutdown the caller holds the app's processing
lock through all three steps, so no record is processed in between. The periodic commit (every
``commit_interval_ms``, this service's background task) does the same under exactly-once (the
transaction spans the whole commit); under at-least-once it releases the lock during step 2, so
records keep being processed while the changelog sends are in flight, and step 3 commits no
partition past its cap (the state changes of later records are still in the stores' write
buffers, not on their way to the changelog).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from .acks import InputProgress
from .metrics import Metrics
from .producer import OutputProducer
from .service import Service
from .task_manager import TaskManager
from .tasks import ManagedTask, TaskState
from .transactions import Transactions

__all__ = ["AtLeastOnceCommit", "CommitMode", "CommitSequence", "TransactionalCommit"]

log = logging.getLogger("streamproc.commit")

#: Bound of one offset commit request (at-least-once): a coordinator that is away does not hold the
#: processing lock longer; the offsets are committed by a later commit.
COMMIT_TIMEOUT_S = 10.0


class CommitMode(Protocol):
    """Step 2 and the end of step 3 of the commit sequence: how outputs become durable and how the
    offsets are committed."""

    #: the whole periodic commit holds the processing lock (else it is released during step 2)
    holds_lock: bool

    async def prepare(self) -> bool:
        """Before step 1: False when nothing may be committed now (e.g. a failed transaction)."""

    async def wait(self, reason: str, futures: Sequence[asyncio.Future[Any]], final: bool, timeout: float,
                   quiet: bool) -> bool:
        """Step 2; False when the commit must not go on."""

    async def commit(self, reason: str, offsets: Mapping[TopicPartition, int]) -> bool:
        """Step 3's commit of ``offsets``; False when it did not happen."""


class AtLeastOnceCommit:
    """Outputs are durable once acknowledged (``acks=all``); offsets go to the group coordinator."""

    holds_lock = False

    def __init__(self, consumer: Callable[[], Any], producer: OutputProducer) -> None:
        self._consumer = consumer
        self._producer = producer

    async def prepare(self) -> bool:
        return True

    async def wait(self, reason: str, futures: Sequence[asyncio.Future[Any]], final: bool, timeout: float,
                   quiet: bool) -> bool:
        # Safety does not depend on this wait (the tracker keeps every partition below its
        # un-acknowledged sends); it lets this commit cover the flush.
        waits: list[Any] = list(futures)
        if final:
            waits.append(asyncio.ensure_future(self._producer.flush()))
        if not waits:
            return True
        done, pending = await asyncio.wait(waits, timeout=timeout)
        if pending:
            (log.debug if quiet else log.warning)(
                "commit (%s): %d send(s) not acknowledged within %.1f s; their partitions are not "
                "committed past them", reason, len(pending), timeout)
            for p in pending:
                if p not in futures:
                    p.cancel()
        for fut in done:
            if not fut.cancelled() and fut.exception() is not None:
                log.error("commit (%s): a send failed: %r", reason, fut.exception())
        return True

    async def commit(self, reason: str, offsets: Mapping[TopicPartition, int]) -> bool:
        if not offsets:
            return False
        try:
            await asyncio.wait_for(self._consumer().commit(dict(offsets)), COMMIT_TIMEOUT_S)
        except (KafkaError, TimeoutError) as exc:
            log.warning("commit (%s) of %d partition(s) failed: %r (a rebalance or a broker outage; the "
                        "records will be committed later or processed again)", reason, len(offsets), exc)
            return False
        return True


class TransactionalCommit:
    """Exactly-once: outputs and offsets commit in the producer's open transaction."""

    holds_lock = True

    def __init__(self, transactions: Transactions, tasks: TaskManager, group_id: str) -> None:
        self._txn = transactions
        self._tasks = tasks
        self._group_id = group_id

    async def prepare(self) -> bool:
        txn = self._txn
        if not txn.usable or self._tasks.failed:
            if not txn.usable or txn.in_transaction:
                await txn.recover()
            return False  # the failed tasks restart first (the app's restart path recovers too)
        return True

    async def wait(self, reason: str, futures: Sequence[asyncio.Future[Any]], final: bool, timeout: float,
                   quiet: bool) -> bool:
        if not self._txn.usable:  # a changelog send of step 1 failed
            await self._txn.recover()
            return False
        return await self._txn.wait_sends(timeout)

    async def commit(self, reason: str, offsets: Mapping[TopicPartition, int]) -> bool:
        return await self._txn.commit(offsets, self._group_id)


@dataclass
class _Staged:
    """Step 1's result: the target tasks, their changelog sends and the commit caps."""

    targets: list[ManagedTask]
    futures: list[asyncio.Future[Any]]
    caps: dict[TopicPartition, int]
    started: float


class CommitSequence(Service):
    """Periodic and on-demand commits of one app (see the module docstring)."""

    label = "committer"

    def __init__(self, mode: CommitMode, tasks: TaskManager, producer: OutputProducer, progress: InputProgress,
                 metrics: Metrics, lock: asyncio.Lock, consumer: Callable[[], Any],
                 on_committed: Callable[[Mapping[TopicPartition, int]], None],
                 interval_ms: int, delivery_timeout_ms: int, shutdown_timeout_ms: int) -> None:
        super().__init__()
        self.mode = mode
        self.tasks = tasks
        self.producer = producer
        self.progress = progress
        self.metrics = metrics
        self.lock = lock
        self._consumer = consumer
        self._on_committed = on_committed
        self.interval_ms = interval_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.shutdown_timeout_ms = shutdown_timeout_ms
        #: the last offset committed per input partition (by this instance, since assignment)
        self.committed: dict[TopicPartition, int] = {}
        self.commits = 0

    async def on_start(self) -> None:
        self.add_background(self._periodic(), "commit-loop")

    async def _periodic(self) -> None:
        while True:
            await asyncio.sleep(self.interval_ms / 1000)
            await self.commit_interval()

    async def commit_interval(self) -> dict[TopicPartition, int]:
        """The periodic commit (see the module docstring for when it holds the lock)."""
        if self.mode.holds_lock:
            async with self.lock:
                return await self.commit_locked("interval")
        async with self.lock:
            if not await self.mode.prepare():
                return {}
            staged = await self._stage(None)
        # bounded by the interval, so partitions whose changelog sends are stuck (a broker away) do
        # not hold back the others' commits; a send that never lands fails its task by delivery timeout
        wait_s = min(self.delivery_timeout_ms, max(self.interval_ms, 100)) / 1000
        if staged.futures and not await self.mode.wait("interval", staged.futures, False, wait_s, True):
            return {}
        async with self.lock:
            return await self._finish("interval", staged, False)

    async def commit_locked(self, reason: str, final: bool = False,
                            tasks: list[ManagedTask] | None = None) -> dict[TopicPartition, int]:
        """Flush changelogs -> make durable -> commit offsets, for ``tasks`` (default: every running
        task; exactly-once always commits every task, the transaction holds them all). Returns the
        offsets committed. Call with the processing lock held."""
        if not await self.mode.prepare():
            return {}
        staged = await self._stage(None if self.mode.holds_lock else tasks)
        timeout = self.delivery_timeout_ms / 1000
        if final:
            timeout = min(timeout, self.shutdown_timeout_ms / 1000)
        if (staged.futures or final or self.mode.holds_lock) and not await self.mode.wait(
                reason, staged.futures, final, timeout, False):
            return {}
        return await self._finish(reason, staged, final)

    async def _stage(self, tasks: list[ManagedTask] | None) -> _Staged:
        """Step 1: send every target's pending changelog records; note the commit caps."""
        started = time.perf_counter()
        targets = [mt for mt in (tasks if tasks is not None else self.tasks.runnable())
                   if mt.state is TaskState.RUNNING]
        tracker = self.progress.tracker
        futures: list[asyncio.Future[Any]] = []
        caps: dict[TopicPartition, int] = {}
        for mt in targets:
            for tp in mt.inputs:
                cap = tracker.begun_until(tp)
                if cap is not None:
                    caps[tp] = cap
            sent = await self._flush_changelogs(mt)
            self.progress.flushed(mt.inputs, sent)
            futures += sent
        self.tasks.export_metrics(targets)
        return _Staged(targets, futures, caps, started)

    async def _finish(self, reason: str, staged: _Staged, final: bool) -> dict[TopicPartition, int]:
        """Step 3: commit each target partition's committable offset, at most its cap."""
        tracker = self.progress.tracker
        offsets: dict[TopicPartition, int] = {}
        assigned = self._consumer().assignment()
        for mt in staged.targets:
            if mt.state is not TaskState.RUNNING or mt.id in self.tasks.failed:
                continue
            if any(tracker.failure(tp) is not None for tp in mt.inputs):
                continue
            if final and any(tracker.pending_sends(tp) for tp in mt.inputs):
                log.warning("commit (%s): task %s still has un-acknowledged sends; committing its lowest "
                            "un-acknowledged offsets", reason, mt.id)
            for tp in mt.inputs:
                cap = staged.caps.get(tp)
                if cap is None or tp not in assigned:
                    continue
                off = tracker.committable_offset(tp, cap)
                if off is not None and self.committed.get(tp, -1) < off:
                    offsets[tp] = off
        committed: dict[TopicPartition, int] = {}
        if await self.mode.commit(reason, offsets) and offsets:
            committed = offsets
            self.committed.update(offsets)
            self._on_committed(offsets)
            self.commits += 1
            self.metrics.commits.inc()
            log.debug("committed (%s) %s", reason,
                      ", ".join(f"{tp.topic}[{tp.partition}]={o}" for tp, o in sorted(offsets.items())))
        self.metrics.commit_latency.observe(time.perf_counter() - staged.started)
        self.metrics.pending_acks.set(tracker.pending_sends())
        return committed

    async def _flush_changelogs(self, mt: ManagedTask) -> list[asyncio.Future[Any]]:
        changelogs = mt.task.drain_changelogs()
        if not changelogs:
            return []
        buf = self.producer.buffer()
        partition = mt.task.partition
        for topic, records in changelogs.items():
            buf.add_to_partition(topic, partition, records)
            self.metrics.changelog_records.labels(topic).inc(len(records))
        return [fut for fut, _ in await buf.flush()]

    def forget(self, tps: Sequence[TopicPartition]) -> None:
        """Partitions revoked: the next owner's commits are not ours to compare against."""
        for tp in tps:
            self.committed.pop(tp, None)
