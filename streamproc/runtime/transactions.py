"""Exactly-once (``processing_guarantee="exactly_once_v2"``): the producer's Kafka transactions.

The v2 model of Kafka Streams (KIP-447): one transactional producer per application instance,
``transactional_id = <application_id>-<instance id>``, carries every task's output, changelog and
dead-letter records and the tasks' input offsets; a commit ends the transaction, so all of them
become visible together or not at all. Every consumer of the app reads ``read_committed`` (the
input and repartition topics, and the restore consumer, which therefore never replays a changelog
record of an aborted transaction).

:class:`Transactions` belongs to the :class:`~streamproc.runtime.producer.OutputProducer` (as
Kafka Streams' ``StreamsProducer`` owns its transactions): every flush of a send buffer joins the
open transaction (:meth:`before_send`, :meth:`track`), and the commit sequence
(``commit.py``) ends it with :meth:`wait_sends` and :meth:`commit`. A transaction begins lazily at
its first send, or at a commit that has offsets to write.

Failures: a send that fails or times out, a failing commit, or a fenced producer makes the
transaction unusable (:meth:`fail`): the owner's ``on_abort`` callback fails every running task
(each is then closed **dirty**, its input rewound to the last committed offset and its stores
rebuilt from the changelog, read_committed). :meth:`recover` replaces the producer:
``init_transactions`` with the same transactional id bumps the epoch and aborts whatever was open
on the broker, whatever state the old producer was left in. While the brokers cannot be reached
the replacement fails; :meth:`recover` then returns False and is tried again later (with a
back-off), so a broker outage of any length is ridden out: nothing runs until the producer is
back, then every task restarts from its committed offsets. Every wait on the transaction is
bounded by ``transaction_timeout_ms`` + 5 s (past that the broker aborts it anyway). Being fenced
more than :data:`MAX_FENCES` times in :data:`FENCE_WINDOW_S` means another live process uses the
same transactional id: ``on_fatal`` is called.

The instance id comes from ``state_dir`` when set (stable across restarts, so a restarted
instance aborts its predecessor's open transaction at once); without ``state_dir`` it is random per
process, and a transaction left open by a killed process blocks read_committed readers of its
partitions until ``transaction_timeout_ms`` (default here 10 s) aborts it.

Limitation: aiokafka 0.14 speaks ``TxnOffsetCommit`` v0, without the consumer group generation
that KIP-447 uses to fence a zombie member (one that lost its partitions to a session timeout and
has not noticed yet). Such a member can commit at most the transaction it has open; the commit
sequence reduces the window by committing only partitions still assigned. See docs/durability.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import KafkaConnectionError, KafkaError, ProducerFenced

from ..errors import StreamprocError

__all__ = ["EOS_PRODUCER_DEFAULTS", "FENCE_WINDOW_S", "MAX_FENCES", "TransactionFailed", "Transactions"]

log = logging.getLogger("streamproc.transactions")

#: Producer settings of the transactional producer (``transaction_timeout_ms`` overridable).
EOS_PRODUCER_DEFAULTS: dict[str, Any] = {"acks": "all", "enable_idempotence": True,
                                         "transaction_timeout_ms": 10_000}
MAX_FENCES = 3
FENCE_WINDOW_S = 60.0
#: Back-off between attempts to replace the producer while the brokers are unreachable (s).
RECOVER_BACKOFF_S = (0.5, 10.0)


class TransactionFailed(StreamprocError):
    """The open transaction cannot commit (a send failed, the commit failed, or the producer was fenced)."""


class Transactions:
    """The transaction state of one transactional producer.

    ``client`` returns the current aiokafka producer; ``restart`` replaces it (stops the old one,
    starts a new one with the same transactional id). ``on_abort(exc)``: the open transaction failed,
    fail every running task. ``on_fatal(exc)``: the app must stop.
    """

    def __init__(self, transactional_id: str, transaction_timeout_ms: int, client: Callable[[], Any],
                 restart: Callable[[], Awaitable[None]]) -> None:
        self.transactional_id = transactional_id
        #: bound of every wait on the transaction: past transaction_timeout_ms the broker aborts it anyway
        #: (and a producer whose sender died after being fenced would otherwise never answer)
        self.op_timeout = transaction_timeout_ms / 1000 + 5
        self._client = client
        self._restart = restart
        self.on_abort: Callable[[BaseException], None] = lambda exc: None
        self.on_fatal: Callable[[BaseException], None] = lambda exc: None
        self.in_transaction = False
        self.futures: list[asyncio.Future[Any]] = []
        self.failure: BaseException | None = None
        self.committed_transactions = 0
        self.aborted_transactions = 0
        self.producer_restarts = 0
        self._fresh = False
        self._fences: list[float] = []
        self._next_attempt = 0.0
        self._backoff = RECOVER_BACKOFF_S[0]
        self._unreachable_logged = False

    # ---- the send path -----------------------------------------------------------------------

    async def before_send(self) -> bool:
        """Begin the transaction if none is open. False when the current one already failed (the
        caller drops its records: their tasks are being rewound)."""
        if self.failure is not None:
            return False
        if not self.in_transaction:
            try:
                await asyncio.wait_for(self._client().begin_transaction(), self.op_timeout)
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
        self.on_abort(exc)

    # ---- commit (steps 2 and 3 of the commit sequence) ------------------------------------------

    async def wait_sends(self, timeout: float) -> bool:
        """Wait until every send of the transaction is acknowledged; on a failed or late send,
        fail the transaction, replace the producer and return False."""
        if self.futures:
            done, pending = await asyncio.wait(list(self.futures), timeout=min(timeout, self.op_timeout))
            errors = [e for f in done if not f.cancelled() and (e := f.exception()) is not None]
            if pending or errors:
                self.fail(errors[0] if errors else TransactionFailed(
                    f"{len(pending)} send(s) of the transaction not acknowledged within "
                    f"{min(timeout, self.op_timeout):.1f} s"))
                await self.recover()
                return False
        return True

    async def commit(self, offsets: Mapping[TopicPartition, int], group_id: str) -> bool:
        """Write ``offsets`` into the transaction and commit it (nothing to do when there are no
        offsets and no transaction is open). False when it failed (the producer is then replaced)."""
        if not offsets and not self.in_transaction:
            return True
        producer = self._client()
        try:
            if not self.in_transaction:
                await asyncio.wait_for(producer.begin_transaction(), self.op_timeout)
                self.in_transaction = True
                self._fresh = False
            if offsets:
                await asyncio.wait_for(producer.send_offsets_to_transaction(dict(offsets), group_id),
                                       self.op_timeout)
            await asyncio.wait_for(producer.commit_transaction(), self.op_timeout)
        except Exception as exc:  # noqa: BLE001 - any failure aborts and rewinds
            self.fail(exc)
            await self.recover()
            return False
        self.in_transaction = False
        self.futures = []
        self.committed_transactions += 1
        return True

    # ---- recovery --------------------------------------------------------------------------------

    @property
    def usable(self) -> bool:
        """No failed transaction is waiting to be aborted."""
        return self.failure is None

    async def recover(self) -> bool:
        """Abort the open transaction by replacing the producer, failing every running task with
        work in it, so each restarts from its committed offset with its stores rebuilt.

        The producer is always replaced rather than asked to abort: a new producer's
        ``init_transactions`` with the same transactional id aborts the open transaction on the
        broker, whatever state the old producer is in (fenced, its sender failed, a request that
        never returns), and it returns only once the markers of the previous transaction are
        written, so the committed offsets and changelog end offsets the restarted tasks read next
        are final. Skipped when the producer is already fresh (replaced, no transaction since).

        Returns False when the brokers cannot be reached (or the back-off since the last such
        attempt has not passed): call again later; nothing may be sent meanwhile."""
        failure = self.failure
        if failure is None and self.in_transaction:
            failure = TransactionFailed("a task failed while the transaction was open")
        if failure is not None:
            self.failure = failure
            self.on_abort(failure)
        elif self._fresh:
            return True
        if time.monotonic() < self._next_attempt:
            return False
        try:
            await self._replace_producer(isinstance(failure, ProducerFenced))
        except (KafkaConnectionError, KafkaError, OSError, TimeoutError) as exc:
            self._next_attempt = time.monotonic() + self._backoff
            if not self._unreachable_logged:
                self._unreachable_logged = True
                log.warning("cannot replace the transactional producer %s (%s: %s): the brokers are not "
                            "reachable; processing resumes from the committed offsets once they are "
                            "(retrying every %.1f-%.0f s)", self.transactional_id, type(exc).__name__, exc,
                            *RECOVER_BACKOFF_S)
            self._backoff = min(self._backoff * 2, RECOVER_BACKOFF_S[1])
            return False
        if self._unreachable_logged:
            log.info("transactional producer %s is back", self.transactional_id)
        self._unreachable_logged = False
        self._backoff = RECOVER_BACKOFF_S[0]
        self._next_attempt = 0.0
        self.in_transaction = False
        self.futures = []
        self.failure = None
        if failure is not None:
            self.aborted_transactions += 1
            log.info("transaction of %s aborted (%s: %s); tasks restart from their committed offsets",
                     self.transactional_id, type(failure).__name__, failure)
        return True

    async def _replace_producer(self, fenced: bool) -> None:
        now = time.monotonic()
        if fenced:
            self._fences = [t for t in self._fences if now - t < FENCE_WINDOW_S] + [now]
            if len(self._fences) > MAX_FENCES:
                self.on_fatal(TransactionFailed(
                    f"the producer with transactional_id {self.transactional_id!r} was fenced {len(self._fences)} "
                    f"times in {FENCE_WINDOW_S:.0f} s: another running process uses the same transactional id "
                    f"(two instances sharing a state_dir?)"))
                return
        await self._restart()  # a new producer: init_transactions fences the old epoch, aborts its transaction
        new = self._client()
        await asyncio.wait_for(new.begin_transaction(), self.op_timeout)  # returns once it has its epoch
        await asyncio.wait_for(new.abort_transaction(), self.op_timeout)  # (an empty transaction)
        self._fresh = True
        self.producer_restarts += 1
        log.info("transactional producer %s replaced%s", self.transactional_id, " (fenced)" if fenced else "")


def _retrieve(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
