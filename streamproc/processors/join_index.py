"""An in-memory index by key of one stream-stream join buffer.

The join buffers are KIP-428 window stores with duplicates (window start = record timestamp); they
are the state that is change-logged and restored. Their ``fetch(key, time_from, time_to)`` visits
every window start in the range (KIP-428's layout: one segment per start, then the key), which for
a join buffer with a record every millisecond is O(records buffered in the window) per lookup. The
join therefore reads from this index instead: ``key -> [(ts, seq, value), ...]`` ordered by
``(ts, seq)`` (``seq`` = arrival), so a lookup is O(log n + matches).

The index mirrors its store exactly: it is loaded from the store when the task starts (after
restoration), every put into the store is added to it, and after every put the entries the store
expired (``start <= observed - retention``) are dropped, in ``(ts, seq)`` order from a heap.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from typing import Any

__all__ = ["BufferIndex"]


class BufferIndex:
    """``key -> [(ts, seq, value)]`` of one join buffer, expiring with the buffer's retention."""

    __slots__ = ("_by_key", "_heap", "_seq", "retention")

    def __init__(self, retention: int) -> None:
        self.retention = retention
        self._by_key: dict[Any, list[tuple[int, int, Any]]] = {}
        self._heap: list[tuple[int, int, Any]] = []
        self._seq = 0

    def load(self, store: Any) -> None:
        """Add every entry of ``store`` (an in-memory window store), by start then key then arrival."""
        with store.all() as entries:
            for windowed, value in entries:
                self.add(windowed.key, windowed.start, value)

    def add(self, key: Any, ts: int, value: Any) -> None:
        seq = self._seq
        self._seq = seq + 1
        entry = (ts, seq, value)
        entries = self._by_key.get(key)
        if entries is None:
            self._by_key[key] = [entry]
        elif entries[-1][0] <= ts:
            entries.append(entry)
        else:
            insort(entries, entry)                   # seq is unique: values are never compared
        heapq.heappush(self._heap, (ts, seq, key))   # likewise keys

    def expire(self, observed: int) -> None:
        """Drop the entries with ``ts <= observed - retention`` (what the store expires)."""
        heap = self._heap
        cutoff = observed - self.retention
        if not heap or heap[0][0] > cutoff:
            return
        by_key = self._by_key
        pop = heapq.heappop
        while heap and heap[0][0] <= cutoff:
            _, _, key = pop(heap)
            entries = by_key[key]
            del entries[0]                           # a key's entries leave in (ts, seq) order too
            if not entries:
                del by_key[key]

    def fetch(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        """``(ts, value)`` of ``key`` with ``time_from <= ts <= time_to``, by timestamp then arrival."""
        entries = self._by_key.get(key)
        if not entries:
            return []
        lo = bisect_left(entries, (time_from,))
        hi = bisect_left(entries, (time_to + 1,), lo)
        return [(e[0], e[2]) for e in entries[lo:hi]]

    def __len__(self) -> int:
        return len(self._heap)
