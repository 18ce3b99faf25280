"""Delayed acknowledgement of input offsets: commit an input offset only when its effects are durable.

The runtime tells an :class:`AckTracker` which input offsets it processed (:meth:`AckTracker.begin`)
and which sends (output and changelog records) each one caused (:meth:`AckTracker.add_send`, with a
count or the send's future). :meth:`AckTracker.committable_offset` is then the offset to commit: the
lowest input offset whose sends are not all acknowledged (never past a gap), or ``last begun + 1``
when everything is acknowledged.

Pending acknowledgements are delayed operations in a
:class:`~streamproc.purgatory.DelayedOperationPurgatory`: per partition at most one
:class:`DelayedAck` ``(partition, upto)`` is pending at a time; it completes when every send
registered for offsets ``<= upto`` is acknowledged, and expires after ``delivery_timeout_ms``, which
marks the partition failed and calls ``on_failure(partition, error)`` once. When it completes and
sends are still pending, the next one is armed at once for the newest such offset. So a send that
stays unacknowledged fails its partition no earlier than ``delivery_timeout_ms`` after the
operation covering it was armed and at the latest ``2 * delivery_timeout_ms`` after it was added.
A send whose future fails (or :meth:`AckTracker.send_failed`) fails the partition at once.

Costs: ``begin`` O(1); ``add_send``/``send_acked`` O(1) amortised (one dict entry per input offset
that has sends; acknowledged offsets leave from the front); ``committable_offset`` O(1); one timer
insert per delayed ack, not per record. All calls on the event-loop thread.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Hashable
from datetime import timedelta
from typing import Any

from ..errors import TaskFailedError
from ..time import duration_ms
from .operation import DelayedOperation
from .purgatory import DelayedOperationPurgatory
from .timer import Timer

__all__ = ["AckTracker", "DelayedAck", "PartitionAcks"]

FailureCallback = Callable[[Hashable, BaseException], None]


class _Entry:
    """Pending sends of one input offset."""

    __slots__ = ("offset", "pending")

    def __init__(self, offset: int, pending: int) -> None:
        self.offset = offset
        self.pending = pending


class PartitionAcks:
    """Acknowledgement state of one input partition (also its purgatory watch key, by identity)."""

    __slots__ = ("entries", "failure", "floor", "index", "last_begun", "op", "partition", "pending_sends")

    def __init__(self, partition: Hashable) -> None:
        self.partition = partition
        self.last_begun = -1  # -1: nothing begun yet
        self.floor = -1  # offsets below it may have been committed: no new sends may attach there
        self.entries: deque[_Entry] = deque()  # offsets with sends not all acked, ascending
        self.index: dict[int, _Entry] = {}
        self.op: DelayedAck | None = None
        self.failure: BaseException | None = None
        self.pending_sends = 0

    def head(self) -> int:
        """Lowest offset with un-acknowledged sends, or ``last_begun + 1``."""
        entries = self.entries
        return entries[0].offset if entries else self.last_begun + 1

    def __repr__(self) -> str:
        return (f"PartitionAcks({self.partition!r}, last_begun={self.last_begun}, "
                f"pending_sends={self.pending_sends}, committable={self.head()})")


class DelayedAck(DelayedOperation):
    """Completes when every send of input offsets ``<= upto`` of a partition is acknowledged;
    expires after the delivery timeout (which fails the partition)."""

    __slots__ = ("state", "tracker", "upto")

    def __init__(self, tracker: AckTracker, state: PartitionAcks, upto: int, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.tracker = tracker
        self.state = state
        self.upto = upto

    def try_complete(self) -> bool:
        if self.state.head() > self.upto:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if self.state.op is self:
            self.state.op = None

    def on_expiration(self) -> None:
        tracker = self.tracker
        state = self.state
        tracker.fail_partition(state, TaskFailedError(
            f"delivery timeout: sends caused by input offsets <= {self.upto} of partition "
            f"{state.partition!r} were not all acknowledged within {tracker.delivery_timeout_ms} ms "
            f"(lowest un-acknowledged offset {state.head()})"))

    def __repr__(self) -> str:
        return f"DelayedAck({self.state.partition!r}, upto={self.upto}, completed={self.completed})"


class AckTracker:
    """Delayed acks of one task's input partitions.

    ``AckTracker(purgatory=None, delivery_timeout_ms=120_000, on_failure=None)``: ``purgatory`` may
    be shared by several trackers (watch keys are per tracker and partition); None creates one with a
    private :class:`Timer` (start it with ``tracker.purgatory.timer.start()`` in a running loop).

    Per partition: :meth:`begin` each processed input offset (or the last offset of a batch) in
    strictly increasing order; :meth:`add_send` the sends it caused; acks come from the send futures
    or :meth:`send_acked`. :meth:`committable_offset` is what to commit.
    """

    def __init__(self, purgatory: DelayedOperationPurgatory[Any] | None = None,
                 delivery_timeout_ms: int | timedelta = 120_000,
                 on_failure: FailureCallback | None = None) -> None:
        self.delivery_timeout_ms = duration_ms(delivery_timeout_ms, "delivery_timeout_ms", "AckTracker",
                                               allow_zero=False)
        if purgatory is None:
            purgatory = DelayedOperationPurgatory("delayed-acks", Timer())
        self.purgatory = purgatory
        self.on_failure = on_failure
        self._states: dict[Hashable, PartitionAcks] = {}

    # ------------------------------------------------------------------ input side
    def _state(self, partition: Hashable) -> PartitionAcks:
        state = self._states.get(partition)
        if state is None:
            state = self._states[partition] = PartitionAcks(partition)
        return state

    def begin(self, partition: Hashable, offset: int) -> None:
        """Register input ``offset`` of ``partition`` as processed (or being processed).

        Offsets must be strictly increasing per partition (gaps allowed). O(1).
        """
        state = self._states.get(partition)
        if state is None:
            state = self._state(partition)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0 or offset <= state.last_begun:
            raise ValueError(f"begin({partition!r}, {offset!r}): input offsets must be ints >= 0 and strictly "
                             f"increasing per partition; last begun was {state.last_begun}")
        if state.last_begun < 0:
            state.floor = offset
        state.last_begun = offset

    def add_send(self, partition: Hashable, offset: int | None = None, future_or_count: Any = 1) -> int:
        """Attribute pending sends to input ``offset`` (default: the last begun one); returns the offset.

        ``future_or_count``: an int number of sends (acknowledge each with :meth:`send_acked`) or an
        asyncio future (e.g. aiokafka's send future) that acknowledges itself when it resolves, or
        fails the partition when it raises or is cancelled. ``offset`` must be ``<= last begun`` and not
        below the last committable offset returned (which may already be committed).
        """
        state = self._states.get(partition)
        if state is None or state.last_begun < 0:
            raise ValueError(f"add_send({partition!r}): no input offset was begun on this partition")
        if offset is None:
            offset = state.last_begun
        future = None
        if isinstance(future_or_count, int) and not isinstance(future_or_count, bool):
            count = future_or_count
            if count < 0:
                raise ValueError(f"add_send({partition!r}, {offset}): send count must be >= 0, got {count}")
            if count == 0:
                return offset
        elif hasattr(future_or_count, "add_done_callback"):
            future = future_or_count
            count = 1
        else:
            raise TypeError(f"add_send({partition!r}, {offset}): expected an int count or a future, "
                            f"got {type(future_or_count).__name__} {future_or_count!r}")
        entry = state.index.get(offset)
        if entry is not None:
            entry.pending += count
        else:
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise TypeError(f"add_send({partition!r}): offset must be an int, got {offset!r}")
            if offset > state.last_begun:
                raise ValueError(f"add_send({partition!r}, {offset}): offset is after the last begun "
                                 f"offset {state.last_begun}; begin() it first")
            if offset < state.floor:
                raise ValueError(f"add_send({partition!r}, {offset}): offset is below committable offset "
                                 f"{state.floor} already handed out (it may be committed)")
            entry = _Entry(offset, count)
            entries = state.entries
            if not entries or offset > entries[-1].offset:
                entries.append(entry)
            else:  # rare: sends for an older offset than ones already pending
                entries.insert(bisect_left([e.offset for e in entries], offset), entry)
            state.index[offset] = entry
        state.pending_sends += count
        if state.op is None and state.failure is None:
            self._arm(state)
        if future is not None:
            future.add_done_callback(self._future_callback(state, offset))
        return offset

    def _future_callback(self, state: PartitionAcks, offset: int) -> Callable[[Any], None]:
        def done(fut: Any) -> None:
            if self._states.get(state.partition) is not state:
                return  # partition closed (or re-assigned) since
            if fut.cancelled():
                self.send_failed(state.partition, offset, TaskFailedError(
                    f"send for input offset {offset} of partition {state.partition!r} was cancelled"))
                return
            exc = fut.exception()
            if exc is not None:
                self.send_failed(state.partition, offset, exc)
            else:
                self.send_acked(state.partition, offset)
        return done

    # ------------------------------------------------------------------ ack side
    def send_acked(self, partition: Hashable, offset: int, count: int = 1) -> None:
        """Acknowledge ``count`` sends of input ``offset``. Moves the committable offset when the
        lowest pending offset becomes fully acknowledged, completing the delayed ack if due."""
        state = self._states.get(partition)
        entry = None if state is None else state.index.get(offset)
        if entry is None or count > entry.pending or count < 1:
            pending = 0 if entry is None else entry.pending
            raise ValueError(f"send_acked({partition!r}, {offset}, {count}): only {pending} send(s) pending "
                             f"for that input offset")
        assert state is not None
        entry.pending -= count
        state.pending_sends -= count
        entries = state.entries
        if entry.pending == 0 and entries[0] is entry:
            index = state.index
            while entries and entries[0].pending == 0:
                del index[entries.popleft().offset]
            op = state.op
            if op is not None and state.head() > op.upto:
                self.purgatory.check_and_complete(state)
                if state.op is None and state.pending_sends and state.failure is None:
                    self._arm(state)

    def send_failed(self, partition: Hashable, offset: int, error: BaseException) -> None:
        """A send of input ``offset`` failed: fail the partition now (its sends stay un-acknowledged,
        so the committable offset never passes ``offset``)."""
        state = self._states.get(partition)
        if state is None:
            raise ValueError(f"send_failed({partition!r}, {offset}): unknown partition")
        failure = TaskFailedError(f"send for input offset {offset} of partition {partition!r} failed: {error!r}")
        failure.__cause__ = error
        self.fail_partition(state, failure)

    def _arm(self, state: PartitionAcks) -> None:
        op = DelayedAck(self, state, state.entries[-1].offset, self.delivery_timeout_ms)
        state.op = op
        self.purgatory.try_complete_else_watch(op, (state,))

    def fail_partition(self, state: PartitionAcks, error: BaseException) -> None:
        """Fail the partition of ``state`` (one of this tracker's) with ``error``: the first failure
        is kept (later ones are ignored), its pending delayed ack is completed without effect (its
        timeout stops) and ``on_failure(partition, error)`` is called. Its committable offset never
        passes the failed sends."""
        if state.failure is not None:
            return
        state.failure = error
        op = state.op
        if op is not None and not op.completed:
            op.force_complete()  # stop its timeout; the partition is failed anyway
        state.op = None
        if self.on_failure is not None:
            self.on_failure(state.partition, error)

    # ------------------------------------------------------------------ queries
    def committable_offset(self, partition: Hashable, cap: int | None = None) -> int | None:
        """The offset to commit for ``partition``: the lowest begun input offset with sends not all
        acknowledged, else ``last begun + 1``, and at most ``cap`` when given (an offset whose
        sends are not all registered yet); None when nothing was begun. Never decreases: sends may
        no longer be attributed to offsets below what it returned."""
        state = self._states.get(partition)
        if state is None or state.last_begun < 0:
            return None
        head = state.head()
        if cap is not None and cap < head:
            head = max(cap, state.floor)
        state.floor = head
        return head

    def begun_until(self, partition: Hashable) -> int | None:
        """``last begun offset + 1`` of ``partition`` (None when nothing was begun): the end of what
        has been processed, an upper bound for what may be committed."""
        state = self._states.get(partition)
        if state is None or state.last_begun < 0:
            return None
        return state.last_begun + 1

    def failure(self, partition: Hashable) -> BaseException | None:
        """The error that failed ``partition`` (delivery timeout or send error), or None."""
        state = self._states.get(partition)
        return None if state is None else state.failure

    @property
    def failed_partitions(self) -> list[Hashable]:
        return [p for p, s in self._states.items() if s.failure is not None]

    def pending_sends(self, partition: Hashable | None = None) -> int:
        """Un-acknowledged sends of ``partition`` (all partitions when None)."""
        if partition is None:
            return sum(s.pending_sends for s in self._states.values())
        state = self._states.get(partition)
        return 0 if state is None else state.pending_sends

    def delayed_ack(self, partition: Hashable) -> DelayedAck | None:
        """The pending delayed ack of ``partition`` (introspection), or None."""
        state = self._states.get(partition)
        return None if state is None else state.op

    @property
    def partitions(self) -> list[Hashable]:
        return list(self._states)

    # ------------------------------------------------------------------ lifecycle
    def close_partition(self, partition: Hashable) -> None:
        """Forget ``partition`` (revoked): its pending delayed ack is cancelled (no failure); late
        acks of its send futures are ignored."""
        state = self._states.pop(partition, None)
        if state is not None:
            self.purgatory.cancel_for_key(state)
            state.op = None

    def close(self) -> None:
        """Forget every partition (see :meth:`close_partition`)."""
        for partition in list(self._states):
            self.close_partition(partition)
