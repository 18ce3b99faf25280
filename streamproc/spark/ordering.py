"""The two replay orders of ``streamproc reprocess``, defined once, in plain Python.

Both orders act per *task partition* (partition ``p`` of every source topic of a sub-topology; the
sources are co-partitioned). Within a task partition:

``offset`` (what the live daemon does, made deterministic)
    Each topic-partition is replayed in offset order. When a sub-topology reads several topics
    (currency: the ``rates`` table and the ``payments`` stream), their partitions ``p`` are merged
    the way Kafka Streams picks the next record: always take the head record with the smallest
    timestamp, ties to the smaller topic name. No record ever overtakes an earlier offset of its own
    topic-partition, so per-partition offset order (and with it every late drop the daemon makes)
    is kept. For a single topic it is plain offset order. Records a previous stage wrote to a
    repartition topic get offsets there in the order ``(timestamp, producing partition, output
    sequence)``.

``event-time``
    Records sorted by ``(timestamp, table records first, topic, offset)``: each key's records in
    timestamp order, so no record is late and session windows and joins are recomputed as if the
    data had arrived in order. A table record at the same timestamp as a stream record is applied
    first, so a stream record sees the table version valid at its own timestamp; as the table is
    loaded alongside the stream in time order, every as-of lookup falls inside the versioned store's
    history retention and sees the complete table history (no retention override is needed).

:func:`offset_order` and :func:`event_time_order` are the reference implementations (used by the
tests to feed the TopologyTestDriver); the Spark job computes the same orders with a window
(running max of the timestamp per topic-partition) and a sort; see ``job.py``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

__all__ = ["ORDERS", "event_time_order", "offset_order"]

ORDERS = ("offset", "event-time")

T = TypeVar("T")


def _topic(r: Any) -> str:
    return r.topic  # type: ignore[no-any-return]


def _offset(r: Any) -> int:
    return r.offset  # type: ignore[no-any-return]


def _timestamp(r: Any) -> int:
    return r.timestamp  # type: ignore[no-any-return]


def offset_order(records: Iterable[T], *, topic: Callable[[T], str] = _topic,
                 offset: Callable[[T], int] = _offset, timestamp: Callable[[T], int] = _timestamp) -> list[T]:
    """Merge the records of ONE task partition in ``offset`` order (greedy smallest head timestamp)."""
    by_topic: dict[str, list[T]] = {}
    for r in records:
        by_topic.setdefault(topic(r), []).append(r)
    queues = {t: sorted(rs, key=offset) for t, rs in by_topic.items()}
    heads: list[tuple[int, str]] = [(timestamp(q[0]), t) for t, q in queues.items() if q]
    heapq.heapify(heads)
    pos = {t: 0 for t in queues}
    out: list[T] = []
    while heads:
        _, t = heapq.heappop(heads)
        q = queues[t]
        out.append(q[pos[t]])
        pos[t] += 1
        if pos[t] < len(q):
            heapq.heappush(heads, (timestamp(q[pos[t]]), t))
    return out


def event_time_order(records: Iterable[T], table_topics: Sequence[str] = (), *,
                     topic: Callable[[T], str] = _topic, offset: Callable[[T], int] = _offset,
                     timestamp: Callable[[T], int] = _timestamp) -> list[T]:
    """Sort the records of ONE task partition in ``event-time`` order."""
    tables = set(table_topics)

    def key(r: Any) -> tuple[int, int, str, int]:
        t = topic(r)
        return (timestamp(r), 0 if t in tables else 1, t, offset(r))

    return sorted(records, key=key)
