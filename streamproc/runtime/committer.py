"""Commits, in the one order SEMANTICS section 6 prescribes (at-least-once).

:meth:`Committer.commit_locked` is the only place offsets are committed:

1. **Flush store writes to the changelog**: each running task's change-logging stores are drained
   (``Task.drain_changelogs()``, de-duplicated per key by the wrappers) and sent to partition
   ``task.partition`` of each changelog topic. The sends are registered with the ack tracker on
   each input partition of the task, at the first input offset processed since the previous flush
   (so no offset whose state change they carry becomes committable before they land).
2. **Wait for those sends to be acknowledged** (at most ``delivery_timeout_ms``). On revoke and
   shutdown (``final=True``) every pending output send is waited for as well (producer flush), so
   the commit covers everything processed.
3. **Commit offsets**: for each input partition of a running, non-failed task, the ack tracker's
   committable offset (the lowest un-acknowledged input offset, never past a gap), when it moved
   since the last commit.

A changelog send that fails or times out fails its task (through the tracker); its partitions are
not committed. On revoke and shutdown the caller holds the app's processing lock through all three
steps, so no batch runs in between. The periodic commit (every ``commit_interval_ms``, this
service's background task) holds the lock for steps 1 and 3 only: batches keep running while the
changelog sends are in flight, and step 3 commits no partition past the offset it had reached at
step 1 (``AckTracker.begun_until``), since the state changes of later records are still in the
stores' write buffers, not yet on their way to the changelog.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from .acks import register_changelog_flush
from .service import Service
from .tasks import ManagedTask, TaskState

if TYPE_CHECKING:
    from .app import StreamApp

__all__ = ["Committer"]

log = logging.getLogger(__name__)


class Committer(Service):
    """Periodic and on-demand commits of one :class:`~streamproc.runtime.app.StreamApp`."""

    label = "committer"

    def __init__(self, app: StreamApp) -> None:
        super().__init__()
        self.app = app
        self.committed: dict[TopicPartition, int] = {}
        self.commits = 0

    async def on_start(self) -> None:
        self.add_background(self._periodic(), "commit-loop")

    async def _periodic(self) -> None:
        interval = self.app.config.commit_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            await self.commit_interval()

    async def commit_interval(self) -> dict[TopicPartition, int]:
        """The periodic commit: steps 1 and 3 under the processing lock, step 2 without it."""
        app = self.app
        if app.eos is not None:
            async with app.lock:
                return await self.commit_locked("interval")
        async with app.lock:
            started = time.perf_counter()
            targets, futures, caps = await self._flush_phase(self._targets(None))
        if futures:
            # Safety does not depend on this wait (the tracker keeps every partition below its
            # un-acknowledged changelog sends); it lets this commit cover the flush. Bounded by the
            # interval, so partitions whose changelog sends are stuck (a broker away) do not hold
            # back the others' commits; a send that never lands fails its task by delivery timeout.
            wait_s = min(app.config.delivery_timeout_ms, max(app.config.commit_interval_ms, 100)) / 1000
            await self._wait_phase("interval", futures, False, wait_s, quiet=True)
        async with app.lock:
            return await self._commit_phase("interval", targets, False, caps, started)

    def _targets(self, tasks: list[ManagedTask] | None) -> list[ManagedTask]:
        return [mt for mt in (tasks if tasks is not None else self.app.tasks.running())
                if mt.state is TaskState.RUNNING]

    async def commit_locked(self, reason: str, final: bool = False,
                            tasks: list[ManagedTask] | None = None) -> dict[TopicPartition, int]:
        """Flush changelogs -> wait for acks -> commit offsets, for ``tasks`` (default: all running).

        Returns the offsets committed. Call with ``app.lock`` held.
        """
        app = self.app
        if app.eos is not None:  # exactly-once: one transaction for every task (transactions.py)
            committed = await app.eos.commit_locked(reason, final)
            app.purger.committed(committed)
            return committed
        started = time.perf_counter()
        timeout = app.config.delivery_timeout_ms / 1000
        if final:
            timeout = min(timeout, app.config.shutdown_timeout_ms / 1000)
        targets, futures, caps = await self._flush_phase(self._targets(tasks))
        if futures or final:
            await self._wait_phase(reason, futures, final, timeout)
        return await self._commit_phase(reason, targets, final, caps, started)

    async def _flush_phase(self, targets: list[ManagedTask]) -> tuple[
            list[ManagedTask], list[asyncio.Future[Any]], dict[TopicPartition, int]]:
        """Step 1: send every target's pending changelog records; returns the targets, the send
        futures and, per input partition, how far processing had got (the commit cap)."""
        app = self.app
        tracker = app.acks.tracker
        futures: list[asyncio.Future[Any]] = []
        caps: dict[TopicPartition, int] = {}
        for mt in targets:
            for tp in mt.inputs:
                cap = tracker.begun_until(tp)
                if cap is not None:
                    caps[tp] = cap
            sent = await self._flush_changelogs(mt)
            register_changelog_flush(tracker, mt.inputs, sent, app.unflushed)
            futures += sent
        app.export_task_metrics(targets)
        return targets, futures, caps

    async def _wait_phase(self, reason: str, futures: list[asyncio.Future[Any]], final: bool,
                          timeout: float, quiet: bool = False) -> None:
        """Step 2: wait for the changelog sends (and, when ``final``, for every output send);
        ``quiet``: sends still pending after ``timeout`` are normal (logged at debug)."""
        waits: list[Any] = list(futures)
        if final:
            waits.append(asyncio.ensure_future(self.app.producer.flush()))
        if not waits:
            return
        done, pending = await asyncio.wait(waits, timeout=timeout)
        if pending:
            (log.debug if quiet else log.error)(
                "commit (%s): %d send(s) not acknowledged within %.1f s; their partitions are not "
                "committed past them", reason, len(pending), timeout)
            for p in pending:
                if p not in futures:
                    p.cancel()
        for fut in done:
            if not fut.cancelled() and fut.exception() is not None:
                log.error("commit (%s): a changelog send failed: %r", reason, fut.exception())

    async def _commit_phase(self, reason: str, targets: list[ManagedTask], final: bool,
                            caps: dict[TopicPartition, int], started: float) -> dict[TopicPartition, int]:
        """Step 3: commit each target partition's committable offset, at most its cap."""
        app = self.app
        tracker = app.acks.tracker
        offsets: dict[TopicPartition, int] = {}
        assigned = app.consumer.assignment()
        for mt in targets:
            if mt.state is not TaskState.RUNNING:
                continue
            if any(tracker.failure(tp) is not None for tp in mt.inputs):
                continue
            if final and any(tracker.pending_sends(tp) for tp in mt.inputs):
                log.warning("commit (%s): task %s still has un-acknowledged sends; committing its lowest "
                            "un-acknowledged offsets", reason, mt.id)
            for tp in mt.inputs:
                cap = caps.get(tp)
                if cap is None or tp not in assigned:
                    continue
                off = tracker.committable_offset(tp, cap)
                if off is None:
                    continue
                if self.committed.get(tp, -1) < off:
                    offsets[tp] = off
        if offsets:
            try:
                await app.consumer.commit(offsets)
            except KafkaError as exc:
                log.warning("commit (%s) of %d partition(s) failed: %r (a rebalance is probably under way; "
                            "the records will be committed by their next owner or re-processed)",
                            reason, len(offsets), exc)
                return {}
            self.committed.update(offsets)
            app.purger.committed(offsets)
            self.commits += 1
            app.metrics.commits.inc()
            log.debug("committed (%s) %s", reason,
                      ", ".join(f"{tp.topic}[{tp.partition}]={o}" for tp, o in sorted(offsets.items())))
        app.metrics.commit_latency.observe(time.perf_counter() - started)
        app.metrics.pending_acks.set(tracker.pending_sends())
        return offsets

    async def _flush_changelogs(self, mt: ManagedTask) -> list[asyncio.Future[Any]]:
        changelogs = mt.task.drain_changelogs()
        if not changelogs:
            return []
        buf = self.app.producer.buffer()
        partition = mt.task.partition
        metrics = self.app.metrics
        for topic, records in changelogs.items():
            buf.add_to_partition(topic, partition, records)
            metrics.changelog_records.labels(topic).inc(len(records))
        return [fut for fut, _ in await buf.flush()]

    def forget(self, tps: list[TopicPartition]) -> None:
        """Partitions revoked: the next owner's commits are not ours to compare against."""
        for tp in tps:
            self.committed.pop(tp, None)
