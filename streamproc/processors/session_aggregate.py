"""Session-window aggregation (SEMANTICS.md section 2.2, KIP-94).

For each record ``(key, value, ts)`` with a non-None key:

1. ``stream_time = max(stream_time, ts)``; ``close_time = stream_time - gap - grace``.
2. ``found = store.find_sessions(key, ts - gap, ts + gap)``; ``agg = initializer()`` then
   ``agg = merger(key, agg, s.value)`` for each found session (ordered by end); the merged window
   spans ``[ts, ts]`` and every found session.
3. ``merged_end < close_time``: the record is late, dropped and counted (``dropped_records_late``).
4. Else, unless the merged window is ``[ts, ts]``: every found session is removed and (on update) a
   tombstone ``(Windowed(key, s.start, s.end), None)`` with timestamp ``s.end`` is forwarded. Then
   ``agg = aggregator(key, value, agg)`` is stored under the merged window and (on update) forwarded
   with timestamp ``merged_end``.

``ON_WINDOW_CLOSE`` forwards nothing on update; after each record every session with
``last_emitted_close <= end < close_time`` is forwarded once (timestamp = end, ordered by end then
key) and ``last_emitted_close = close_time``, which is written to a key-value store at the end of
every batch (so it is change-logged and survives restart). Closing sessions are read just before the
put that moves the store's observed time (and so expires them with the default retention
``gap + grace``); an in-memory heap ``(end, key, start)`` of the sessions put since they were last
emitted (rebuilt from the store at ``init``) finds them without scanning the store: entries of
sessions merged away since are skipped when popped (the store no longer has them).

The user functions are all called before the store is changed, so a function that raises (reported
as :class:`~streamproc.errors.ProcessingError`) leaves the state as it was.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from ..records import Windowed
from .base import Processor, kv_writer, user_error

__all__ = ["LAST_EMITTED_CLOSE", "SessionAggregateProcessor", "count_functions", "reduce_functions"]

#: Key of ``last_emitted_close`` in the operator's progress store.
LAST_EMITTED_CLOSE = "last_emitted_close"
_NO_TIME = -1


def count_functions() -> tuple[Callable[[], Any], Callable[[Any, Any, Any], Any], Callable[[Any, Any, Any], Any]]:
    """``count``: initializer 0, aggregator ``agg + 1``, merger ``a + b``."""
    return (lambda: 0), (lambda key, value, agg: agg + 1), (lambda key, a, b: a + b)


def reduce_functions(reducer: Callable[[Any, Any], Any]) -> tuple[
        Callable[[], Any], Callable[[Any, Any, Any], Any], Callable[[Any, Any, Any], Any]]:
    """``reduce(r)``: the first value as-is, then ``r(agg, value)``; merger ``r(a, b)``."""

    def aggregator(key: Any, value: Any, agg: Any) -> Any:
        return value if agg is None else reducer(agg, value)

    def merger(key: Any, a: Any, b: Any) -> Any:
        return b if a is None else reducer(a, b)

    return (lambda: None), aggregator, merger


class SessionAggregateProcessor(Processor):
    """The session-window aggregate operator; its session store is named ``store_name``."""

    __slots__ = (
        "_heap",
        "_progress_dirty",
        "_progress_put",
        "aggregator",
        "dropped_late",
        "dropped_null_key",
        "emit_on_close",
        "gap",
        "grace",
        "initializer",
        "last_emitted_close",
        "merger",
        "progress",
        "progress_store_name",
        "store",
        "store_name",
        "stream_time",
    )
    needs_flush = True

    def __init__(self, name: str, store_name: str, gap: int, grace: int,
                 initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                 merger: Callable[[Any, Any, Any], Any], emit_on_close: bool = False,
                 progress_store_name: str | None = None) -> None:
        super().__init__(name)
        if emit_on_close and progress_store_name is None:
            raise ValueError(f"session aggregate {name!r} emitting on window close needs a progress store")
        self.store_name = store_name
        self.progress_store_name = progress_store_name
        self.gap = gap
        self.grace = grace
        self.initializer = initializer
        self.aggregator = aggregator
        self.merger = merger
        self.emit_on_close = emit_on_close
        self.store: Any = None
        self.progress: Any = None
        self._progress_put: Any = None
        self.stream_time = _NO_TIME
        self.last_emitted_close = _NO_TIME
        self._heap: list[tuple[int, Any, int]] = []
        self._progress_dirty = False
        self.dropped_late = 0
        self.dropped_null_key = 0

    def init(self, task: Any) -> None:
        super().init(task)
        self.store = task.stores[self.store_name]
        inner = getattr(self.store, "inner", self.store)
        self.stream_time = max(_NO_TIME, int(inner.observed_stream_time))
        if self.emit_on_close:
            self.progress = task.stores[self.progress_store_name]
            self._progress_put = kv_writer(self.progress)[0]
            last = self.progress.get(LAST_EMITTED_CLOSE)
            self.last_emitted_close = _NO_TIME if last is None else int(last)
            with inner.all() as sessions:
                self._heap = [(w.end, w.key, w.start) for w, _ in sessions if w.end >= self.last_emitted_close]
            heapq.heapify(self._heap)

    def process(self, key: Any, value: Any, ts: int) -> None:
        if key is None:
            self.dropped_null_key += 1
            self.log_once("null-key", "dropping records with a None key (session aggregation needs a key)")
            return
        self.stream_time = max(self.stream_time, ts)
        gap = self.gap
        close_time = self.stream_time - gap - self.grace
        store = self.store
        found = list(store.find_sessions(key, ts - gap, ts + gap))
        start = end = ts
        try:
            agg = self.initializer()
            if found:
                merger = self.merger
                for window, session_agg in found:
                    start = min(start, window.start)
                    end = max(end, window.end)
                    agg = merger(key, agg, session_agg)
            if end < close_time:
                self.dropped_late += 1
                return
            agg = self.aggregator(key, value, agg)
        except Exception as exc:
            raise user_error(self.name, "aggregation function", exc, key) from exc

        if self.emit_on_close:
            closing = self._take_closing(close_time) if close_time > self.last_emitted_close else None
            if found and (start != ts or end != ts):
                for window, _ in found:
                    store.remove(window)
            store.put(Windowed(key, start, end), agg)
            if not found or start != ts or end != ts:
                heapq.heappush(self._heap, (end, key, start))
            if closing is not None:
                self._emit_closed(closing, close_time)
            return

        forward = self.forward
        if found and (start != ts or end != ts):
            for window, _ in found:
                store.remove(window)
                forward(window, None, window.end)
        merged = Windowed(key, start, end)
        store.put(merged, agg)
        forward(merged, agg, end)

    def _take_closing(self, close_time: int) -> list[tuple[Windowed, Any]]:
        """Pop the heap entries with ``end < close_time`` and read (before expiry) those sessions the
        store still has, in ``(end, key)`` order; duplicates (a window put twice) are adjacent."""
        heap = self._heap
        if not heap or heap[0][0] >= close_time:
            return []
        fetch = self.store.fetch_session
        out = []
        previous = None
        pop = heapq.heappop
        while heap and heap[0][0] < close_time:
            entry = pop(heap)
            if entry == previous:
                continue
            previous = entry
            end, key, start = entry
            agg = fetch(key, start, end)
            if agg is not None:
                out.append((Windowed(key, start, end), agg))
        return out

    def _emit_closed(self, closing: list[tuple[Windowed, Any]], close_time: int) -> None:
        self.last_emitted_close = close_time
        self._progress_dirty = True
        forward = self.forward
        for window, agg in closing:
            forward(window, agg, window.end)

    def flush(self) -> None:
        if self._progress_dirty:
            self._progress_dirty = False
            self._progress_put(LAST_EMITTED_CLOSE, self.last_emitted_close, self.stream_time)

    def metrics(self) -> dict[str, int]:
        return {"dropped_records_late": self.dropped_late, "dropped_records_null_key": self.dropped_null_key}
