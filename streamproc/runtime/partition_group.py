"""The fetched, not yet processed input records of one task, and the order it processes them in.

A task reads one partition of each of its input topics (sources, versioned-table topics,
repartition topics). The consumer hands over records per partition, in whatever order the fetches
return; a :class:`PartitionGroup` buffers them per partition and releases them in **timestamp
order across the task's partitions** (docs/semantics.md, "Ordering of a task's inputs"):

* the next record processed is the head (oldest buffered record) with the smallest timestamp
  among the partitions that have something buffered; ties go to the partition whose topic name
  sorts first (then the lower partition number); the records of one partition are never
  reordered;
* while a partition has nothing buffered but is known to have unread records (the caller says
  which: :meth:`next_run`'s ``lagging``), the task waits: nothing is released, so the partition's
  records, once fetched, are merged in their place. A partition with nothing unread never blocks.
  The wait is bounded by ``max_idle_ms``: past it the group releases what it has (*enforced
  processing*, counted in :attr:`enforced_runs`) until the lagging partition has records again.
  ``max_idle_ms=0`` never waits;
* a partition holding ``bound`` records or more is *full* (:meth:`full`): the caller pauses its
  fetching and resumes it once the partition is below the bound again.

Records are released in *runs*: the longest stretch of one partition's records that the rule
would process one by one before any other partition's head, so a task with one input (or whose
inputs do not interleave) processes whole fetched batches per call, as before ordering existed.

Records are objects with ``timestamp`` and ``offset`` (aiokafka's ``ConsumerRecord``); partitions
are any hashable with ``topic`` and ``partition`` (``TopicPartition``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Sequence
from typing import Any

__all__ = ["NO_TIME", "PartitionGroup"]

#: The floor of a lagging partition nothing was released from yet: before any timestamp.
NO_TIME = -(2**63)


class _Queue:
    """One partition's buffered records: fetched lists, consumed from ``start``."""

    __slots__ = ("chunks", "last_timestamp", "rank", "size", "start", "tp")

    def __init__(self, tp: Any, rank: int) -> None:
        self.tp = tp
        self.rank = rank
        self.chunks: deque[Sequence[Any]] = deque()
        self.start = 0
        self.size = 0
        #: timestamp of the last record released (None: none yet)
        self.last_timestamp: int | None = None

    def head_timestamp(self) -> int:
        return self.chunks[0][self.start].timestamp  # type: ignore[no-any-return]

    def take(self, limit: int | None) -> Sequence[Any]:
        """Records of the first chunk with ``timestamp <= limit`` (all of it when ``limit`` is
        None), at least one."""
        chunk = self.chunks[0]
        start = self.start
        end = len(chunk)
        if limit is not None:
            stop = start + 1
            while stop < end and chunk[stop].timestamp <= limit:
                stop += 1
            end = stop
        run = chunk if start == 0 and end == len(chunk) else chunk[start:end]
        self.last_timestamp = chunk[end - 1].timestamp
        if end == len(chunk):
            self.chunks.popleft()
            self.start = 0
        else:
            self.start = end
        self.size -= end - start
        return run


class PartitionGroup:
    """The input buffer of one task (see the module docstring for the rule)."""

    __slots__ = ("_blocked_since", "_queues", "bound", "enforced_runs", "max_idle_ms")

    def __init__(self, partitions: Iterable[Any], bound: int = 1000, max_idle_ms: int = 30_000) -> None:
        if bound < 1:
            raise ValueError(f"bound must be at least 1 record per partition, got {bound!r}")
        if max_idle_ms < 0:
            raise ValueError(f"max_idle_ms must not be negative, got {max_idle_ms!r}")
        ordered = sorted(partitions, key=lambda tp: (tp.topic, tp.partition))
        self._queues = {tp: _Queue(tp, rank) for rank, tp in enumerate(ordered)}
        self.bound = bound
        self.max_idle_ms = max_idle_ms
        #: runs released while a lagging partition had nothing buffered (the wait ran out)
        self.enforced_runs = 0
        self._blocked_since: int | None = None

    # ---- buffering ---------------------------------------------------------------------------

    def add(self, tp: Any, records: Sequence[Any]) -> None:
        """Buffer ``records`` of ``tp`` (in offset order, following what was buffered before)."""
        if records:
            queue = self._queues[tp]
            queue.chunks.append(records)
            queue.size += len(records)

    def buffered(self, tp: Any) -> int:
        return self._queues[tp].size

    def full(self, tp: Any) -> bool:
        """``tp`` holds ``bound`` records or more: pause its fetching."""
        return self._queues[tp].size >= self.bound

    def __len__(self) -> int:
        return sum(q.size for q in self._queues.values())

    @property
    def partitions(self) -> list[Any]:
        """The task's input partitions, in tie-break order."""
        return list(self._queues)

    def empty_partitions(self) -> list[Any]:
        """Partitions with nothing buffered (the caller finds out which of them are lagging)."""
        return [tp for tp, q in self._queues.items() if not q.size]

    def clear(self) -> dict[Any, int]:
        """Forget everything buffered; returns the first buffered offset of each partition that had
        records (where to fetch them again)."""
        firsts = {}
        for tp, q in self._queues.items():
            if q.size:
                firsts[tp] = q.chunks[0][q.start].offset
            q.chunks.clear()
            q.start = q.size = 0
        self._blocked_since = None
        return firsts

    # ---- releasing ---------------------------------------------------------------------------

    def waiting_since(self) -> int | None:
        """When the group started waiting for a lagging partition (ms), or None."""
        return self._blocked_since

    def ready(self, now_ms: int, lagging: Collection[Any] = ()) -> bool:
        """Whether records may be released now: no partition of ``lagging`` is empty, or the group
        has waited ``max_idle_ms`` for them already. Starts (or ends) the wait accordingly."""
        if lagging and any(not self._queues[tp].size for tp in lagging):
            if self._blocked_since is None:
                self._blocked_since = now_ms
            return now_ms - self._blocked_since >= self.max_idle_ms
        self._blocked_since = None
        return True

    def head_timestamp(self) -> int | None:
        """The timestamp of the record :meth:`next_run` would release first (None: nothing buffered)."""
        heads = [q.head_timestamp() for q in self._queues.values() if q.size]
        return min(heads) if heads else None

    def floor(self, lagging: Collection[Any] = ()) -> int | None:
        """How far this task is behind in event time: the smallest of its buffered heads and, for
        each empty partition of ``lagging``, the timestamp last released from it (``NO_TIME`` when
        none was yet). None: nothing buffered and nothing lagging."""
        stamps = [q.head_timestamp() for q in self._queues.values() if q.size]
        for tp in lagging:
            q = self._queues[tp]
            if not q.size:
                stamps.append(NO_TIME if q.last_timestamp is None else q.last_timestamp)
        return min(stamps) if stamps else None

    def next_run(self, now_ms: int, lagging: Collection[Any] = (),
                 horizon: int | None = None) -> tuple[Any, Sequence[Any]] | None:
        """The next records to process, ``(tp, records)``, or None (nothing buffered, waiting, or
        the next record is past ``horizon``).

        ``lagging``: partitions with nothing buffered that have unread records on the broker (or
        whose lag is not known yet). ``now_ms``: a monotonic clock, for the wait bound.
        ``horizon``: release no record with a timestamp above it (the run stops before the first
        such record; the caller aligns several tasks in time this way).
        """
        heads = [q for q in self._queues.values() if q.size]
        if not heads:
            self._blocked_since = None
            return None
        if not self.ready(now_ms, lagging):
            return None
        enforced = self._blocked_since is not None
        if len(heads) == 1:
            queue = heads[0]
            limit = None
        else:
            keyed = sorted((q.head_timestamp(), q.rank, q) for q in heads)
            queue = keyed[0][2]
            next_ts, next_rank, _ = keyed[1]
            limit = next_ts if queue.rank < next_rank else next_ts - 1
        if horizon is not None:
            if queue.head_timestamp() > horizon:
                return None
            limit = horizon if limit is None else min(limit, horizon)
        if enforced:
            self.enforced_runs += 1
        return queue.tp, queue.take(limit)
