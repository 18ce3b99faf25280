"""Exactly-once (``processing_guarantee="exactly_once_v2"``): one Kafka transaction per commit.

The v2 model of Kafka Streams (KIP-447): one transactional producer per application instance,
``transactional_id = <application_id>-<instance id>``, carries every task's output, changelog and
dead-letter records and the tasks' input offsets; a commit ends the transaction, so all of them
become visible together or not at all. Every consumer of the app reads ``read_committed`` (the
input and repartition topics, and the restore consumer, which therefore never replays a changelog
record of an aborted transaction).

Commit (:meth:`ExactlyOnce.commit_locked`, called by the Committer with the processing lock held;
SEMANTICS section 6 order):

1. flush every running task's change-logging stores into the transaction;
2. wait for every send of the transaction to be acknowledged (``delivery_timeout_ms``);
3. ``send_offsets_to_transaction`` (the next offset to process of each input partition) and
   ``commit_transaction``.

A transaction begins lazily at its first send (:meth:`before_send`, called by ``SendBuffer.flush``)
or at a commit that has offsets to write.

Failures: a send that fails or times out, a failing commit, or a fenced producer makes the
transaction unusable. :meth:`recover` then replaces the producer (``init_transactions`` with the
same transactional id bumps the epoch and aborts whatever was open on the broker, whatever state
the old producer was left in) and fails every running task: each is closed **dirty** (its
in-memory state includes effects of the aborted transaction), its input rewound to the last
committed offset and its stores rebuilt from the changelog (read_committed), by the app's normal
task-restart path. Every wait on the transaction is bounded by ``transaction_timeout_ms`` + 5 s
(past that the broker aborts it anyway). Being fenced more than :data:`MAX_FENCES` times in
:data:`FENCE_WINDOW_S` means another live process uses the same transactional id: that is fatal.

The instance id comes from ``state_dir`` when set (stable across restarts, so a restarted
instance aborts its predecessor's open transaction at once); without ``state_dir`` it is random per
process, and a transaction left open by a killed process blocks read_committed readers of its
partitions until ``transaction_timeout_ms`` (default here 10 s) aborts it.

Limitation: aiokafka 0.14 speaks ``TxnOffsetCommit`` v0, without the consumer group generation
that KIP-447 uses to fence a zombie member (one that lost its partitions to a session timeout and
has not noticed yet). Such a member can commit at most the transaction it has open; this module
reduces the window by committing only partitions still assigned. See docs/durability.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from aiokafka import TopicPartition
from aiokafka.errors import ProducerFenced

from ..errors import StreamprocError
from .acks import register_changelog_flush
from .tasks import TaskState

if TYPE_CHECKING:
    from .app import StreamApp

__all__ = ["EOS_PRODUCER_DEFAULTS", "FENCE_WINDOW_S", "MAX_FENCES", "ExactlyOnce", "TransactionFailed"]

log = logging.getLogger("streamproc.transactions")

#: Producer settings of the transactional producer (``transaction_timeout_ms`` overridable).
EOS_PRODUCER_DEFAULTS: dict[str, Any] = {"acks": "all", "enable_idempotence": True,
                                         "transaction_timeout_ms": 10_000}
MAX_FENCES = 3
FENCE_WINDOW_S = 60.0


class TransactionFailed(StreamprocError):
    """The open transaction cannot commit (a send failed, the commit failed, or the producer was fenced)."""


class ExactlyOnce:
    """The transaction state of one :class:`~streamproc.runtime.app.StreamApp`."""

    def __init__(self, app: StreamApp, transactional_id: str, transaction_timeout_ms: int = 10_000) -> None:
        self.app = app
        self.transactional_id = transactional_id
        #: bound of every wait on the transaction: past transaction_timeout_ms the broker aborts it anyway
        #: (and a producer whose sender died after being fenced would otherwise never answer)
        self.op_timeout = transaction_timeout_ms / 1000 + 5
        self.in_transaction = False
        self.futures: list[asyncio.Future[Any]] = []
        self.failure: BaseException | None = None
        self.committed_transactions = 0
        self.aborted_transactions = 0
        self.producer_restarts = 0
        self._fresh = False
        self._fences: list[float] = []

    @property
    def producer(self) -> Any:
        p = self.app.producer.producer
        assert p is not None, "producer not started"
        return p

    # ---- the send path -----------------------------------------------------------------------

    async def before_send(self) -> bool:
        """Begin the transaction if none is open. False when the current one already failed (the
        caller drops its records: their tasks are being rewound)."""
        if self.failure is not None:
            return False
        if not self.in_transaction:
            try:
                await asyncio.wait_for(self.producer.begin_transaction(), self.op_timeout)
            except Exception as exc:  # noqa: BLE001 - e.g. fenced before the first send
                self.fail(exc)
                return False
            self.in_transaction = True
            self._fresh = False
        return True

    def track(self, futures: Iterable[asyncio.Future[Any]]) -> None:
        """Sends of the open transaction (waited for at commit)."""
        for fut in futures:
            fut.add_done_callback(_retrieve)  # a failed send is handled at commit, never "unretrieved"
            self.futures.append(fut)

    def fail(self, exc: BaseException) -> None:
        """The open transaction cannot commit: remember why and fail every running task."""
        if self.failure is None:
            self.failure = exc
            log.error("transaction of %s failed: %s: %s; aborting, every task restarts from its last "
                      "committed offset with state rebuilt from the changelogs",
                      self.transactional_id, type(exc).__name__, exc)
        self._fail_tasks(exc)

    def _fail_tasks(self, exc: BaseException) -> None:
        app = self.app
        for mt in app.tasks:
            if mt.state is TaskState.RUNNING:
                for tp in mt.inputs:
                    app._on_ack_failure(tp, exc)  # marks the task failed (once), counted in metrics

    # ---- commit ----------------------------------------------------------------------------------

    async def commit_locked(self, reason: str, final: bool = False) -> dict[TopicPartition, int]:
        """Flush changelogs into the transaction, wait for its sends, commit it with the offsets.
        Returns the offsets committed ({} when nothing was committed). Call with ``app.lock`` held."""
        app = self.app
        committer = app.committer
        started = time.perf_counter()
        if self.failure is not None or app._failed:
            if self.failure is not None or self.in_transaction:
                await self.recover()
            return {}  # the failed tasks restart first (the app's restart path calls recover())
        tracker = app.acks.tracker
        targets = app.tasks.running()
        timeout = min(app.config.delivery_timeout_ms / 1000, self.op_timeout)
        if final:
            timeout = min(timeout, app.config.shutdown_timeout_ms / 1000)

        # 1. changelogs into the transaction
        for mt in targets:
            futures = await committer._flush_changelogs(mt)
            register_changelog_flush(tracker, mt.inputs, futures, app.unflushed)
        app.export_task_metrics(targets)
        if self.failure is not None:
            await self.recover()
            return {}

        # 2. every send of the transaction acknowledged
        if self.futures:
            done, pending = await asyncio.wait(list(self.futures), timeout=timeout)
            errors = [e for f in done if not f.cancelled() and (e := f.exception()) is not None]
            if pending or errors:
                self.fail(errors[0] if errors else TransactionFailed(
                    f"{len(pending)} send(s) of the transaction not acknowledged within {timeout:.1f} s"))
                await self.recover()
                return {}

        # 3. offsets + commit
        offsets: dict[TopicPartition, int] = {}
        assigned = app.consumer.assignment()
        for mt in targets:
            for tp in mt.inputs:
                off = tracker.committable_offset(tp)
                if off is None or tp not in assigned:
                    continue
                if committer.committed.get(tp, -1) < off:
                    offsets[tp] = off
        if not offsets and not self.in_transaction:
            return {}
        try:
            if not self.in_transaction:
                await asyncio.wait_for(self.producer.begin_transaction(), self.op_timeout)
                self.in_transaction = True
                self._fresh = False
            if offsets:
                await asyncio.wait_for(self.producer.send_offsets_to_transaction(
                    offsets, app.config.application_id), self.op_timeout)
            await asyncio.wait_for(self.producer.commit_transaction(), self.op_timeout)
        except Exception as exc:  # noqa: BLE001 - any failure aborts and rewinds
            self.fail(exc)
            await self.recover()
            return {}
        self.in_transaction = False
        self.futures = []
        self.committed_transactions += 1
        if offsets:
            committer.committed.update(offsets)
            committer.commits += 1
            app.metrics.commits.inc()
            log.debug("committed transaction (%s) with %s", reason,
                      ", ".join(f"{tp.topic}[{tp.partition}]={o}" for tp, o in sorted(offsets.items())))
        app.metrics.commit_latency.observe(time.perf_counter() - started)
        app.metrics.pending_acks.set(tracker.pending_sends())
        return offsets

    # ---- recovery --------------------------------------------------------------------------------

    async def recover(self) -> None:
        """Called before failed tasks restart (and when the open transaction failed): abort the open
        transaction, failing every running task with work in it, and replace the producer, so each
        task restarts from its committed offset with its stores rebuilt from the changelogs.

        The producer is always replaced rather than asked to abort: a new producer's
        ``init_transactions`` with the same transactional id aborts the open transaction on the
        broker, whatever state the old producer is in (fenced, its sender failed, a request that
        never returns), and it returns only once the markers of the previous transaction are
        written, so the committed offsets and changelog end offsets the restarted tasks read next
        are final. Skipped when the producer is already fresh (replaced, no transaction since)."""
        failure = self.failure
        if failure is None and self.in_transaction:
            failure = TransactionFailed("a task failed while the transaction was open")
        if failure is not None:
            self.failure = failure
            self._fail_tasks(failure)
        elif self._fresh:
            return
        await self._replace_producer(isinstance(failure, ProducerFenced))
        self.in_transaction = False
        self.futures = []
        self.failure = None
        if failure is not None:
            self.aborted_transactions += 1
            log.info("transaction of %s aborted (%s: %s); tasks restart from their committed offsets",
                     self.transactional_id, type(failure).__name__, failure)

    async def _replace_producer(self, fenced: bool) -> None:
        now = time.monotonic()
        if fenced:
            self._fences = [t for t in self._fences if now - t < FENCE_WINDOW_S] + [now]
            if len(self._fences) > MAX_FENCES:
                self.app._set_fatal(TransactionFailed(
                    f"the producer with transactional_id {self.transactional_id!r} was fenced {len(self._fences)} "
                    f"times in {FENCE_WINDOW_S:.0f} s: another running process uses the same transactional id "
                    f"(two instances sharing a state_dir?)"))
                return
        out = self.app.producer
        old = out.producer
        if old is not None:
            try:
                await asyncio.wait_for(old.stop(), 10)
            except Exception as exc:  # noqa: BLE001 - a fenced producer may fail to stop cleanly
                log.debug("stopping the old producer: %r", exc)
        await out.on_start()  # a new producer: init_transactions fences the old epoch, aborts its transaction
        new = out.producer
        assert new is not None
        await asyncio.wait_for(new.begin_transaction(), self.op_timeout)  # returns once it has its epoch
        await asyncio.wait_for(new.abort_transaction(), self.op_timeout)  # (an empty transaction)
        self._fresh = True
        self.producer_restarts += 1
        log.info("transactional producer %s replaced%s", self.transactional_id, " (fenced)" if fenced else "")


def _retrieve(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
