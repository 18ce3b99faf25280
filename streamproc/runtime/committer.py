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
not committed. The caller holds the app's processing lock, so no batch runs between steps 1 and 3.
The periodic loop (every ``commit_interval_ms``) runs as this service's background task.
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

    def __init__(self, app: "StreamApp") -> None:
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
            async with self.app.lock:
                await self.commit_locked("interval")

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
        tracker = app.acks.tracker
        targets = [mt for mt in (tasks if tasks is not None else app.tasks.running())
                   if mt.state is TaskState.RUNNING]
        timeout = app.config.delivery_timeout_ms / 1000
        if final:
            timeout = min(timeout, app.config.shutdown_timeout_ms / 1000)

        # 1. flush pending store writes to the changelogs
        changelog_futures: list[asyncio.Future[Any]] = []
        for mt in targets:
            futures = await self._flush_changelogs(mt)
            register_changelog_flush(tracker, mt.inputs, futures, app.unflushed)
            changelog_futures += futures
        app.export_task_metrics(targets)

        # 2. wait for those sends (and on revoke/shutdown for every output send)
        waits: list[Any] = list(changelog_futures)
        if final:
            waits.append(asyncio.ensure_future(app.producer.flush()))
        if waits:
            done, pending = await asyncio.wait(waits, timeout=timeout)
            if pending:
                log.error("commit (%s): %d send(s) not acknowledged within %.1f s; their partitions are "
                          "not committed", reason, len(pending), timeout)
                for p in pending:
                    if p not in changelog_futures:
                        p.cancel()
            for fut in done:
                if not fut.cancelled() and fut.exception() is not None:
                    log.error("commit (%s): a changelog send failed: %r", reason, fut.exception())

        # 3. commit the committable offsets
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
                off = tracker.committable_offset(tp)
                if off is None or tp not in assigned:
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
