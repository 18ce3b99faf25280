"""Session-window aggregation (docs/semantics.md, "Session windows", KIP-94).

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
``last_emitted_close <= end < close_time`` is forwarded once (timestamp = end, ordered by end, then
start, then key) and ``last_emitted_close = close_time``, which is written to a key-value store at the end of
every batch (so it is change-logged and survives restart). Closing sessions are read just before the
put that moves the store's observed time (and so expires them with the default retention
``gap + grace``); in-memory items ``(end, start, key, seq, entry)`` of the sessions put since they
were last emitted (rebuilt from the store at ``init``) find them without scanning the store: entries
of sessions merged away since are skipped when taken (the store no longer has them). An item
ordered after the last one queued goes to a deque (with mostly increasing event times, nearly all
of them), any other to a heap; closing sessions are taken from the fronts of both in order, so most
items cost an append and a popleft instead of heap sifts. On the fast path (below) an item holds
the store's entry itself, so no lookup is needed to read it.

The user functions are all called before the store is changed, so a function that raises (reported
as :class:`~streamproc.errors.ProcessingError`) leaves the state as it was.

Store access goes through the session store's public session-entry operations (see
:mod:`streamproc.stores.session`): ``find_mergeable(key, ts, gap)`` (what ``find_sessions(key, ts -
gap, ts + gap)`` returns, as the store's entries ``[end, start, agg, key]``, without building result
objects), ``replace_sessions(key, removed, start, end, agg)`` (``remove`` each removed session, then
``put`` the merged one, change-logged the same way; the common case, a record extending the one
session of its key, updates that session in place) and ``session_entries()``. A
:class:`~streamproc.stores.SessionStore` and its change-logging wrapper provide them; any other
object given as the store (a test double) is used through ``find_sessions``/``remove``/``put``. On
update, the tombstones and the new value are forwarded after the store was written (no operator
reads this store while the record is forwarded).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ..records import Windowed
from ..stores.changelog import ChangeLoggingSessionStore
from ..stores.session import SessionStore
from .base import Processor, kv_writer, user_error

_windowed = tuple.__new__  # Windowed(...) without the NamedTuple __new__ wrapper (hot path)

__all__ = ["LAST_EMITTED_CLOSE", "SessionAggregateProcessor", "count_functions", "reduce_functions"]

#: Key of ``last_emitted_close`` in the operator's progress store.
LAST_EMITTED_CLOSE = "last_emitted_close"
_NO_TIME = -1
_NONE: tuple[list[Any], ...] = ()


def _not_initialised(*args: Any) -> Any:
    raise RuntimeError("session aggregate used before init()")


def _public_find(store: Any) -> Callable[[Any, int, int], list[list[Any]]]:
    """``SessionStore.find_mergeable`` through ``find_sessions``: copies of the entries
    ``[end, start, agg, key]`` (not the store's own)."""

    def find(key: Any, timestamp: int, gap: int) -> list[list[Any]]:
        with store.find_sessions(key, timestamp - gap, timestamp + gap) as it:
            return [[w.end, w.start, agg, w.key] for w, agg in it]

    return find


def _public_replace(store: Any) -> Callable[[Any, Sequence[list[Any]], int, int, Any], bool]:
    """``SessionStore.replace_sessions`` through ``remove`` and ``put``."""

    def replace(key: Any, removed: Sequence[list[Any]], start: int, end: int, agg: Any) -> bool:
        for entry in removed:
            store.remove(Windowed(entry[3], entry[1], entry[0]))
        return bool(store.put(Windowed(key, start, end), agg))

    return replace


def _count_init() -> int:
    return 0


def _count_add(key: Any, value: Any, agg: Any) -> Any:
    return agg + 1


def _count_merge(key: Any, a: Any, b: Any) -> Any:
    return a + b


def count_functions() -> tuple[Callable[[], Any], Callable[[Any, Any, Any], Any], Callable[[Any, Any, Any], Any]]:
    """``count``: initializer 0, aggregator ``agg + 1``, merger ``a + b`` (the session aggregate
    recognises these three and does the arithmetic inline)."""
    return _count_init, _count_add, _count_merge


def reduce_functions(reducer: Callable[[Any, Any], Any]) -> tuple[
        Callable[[], Any], Callable[[Any, Any, Any], Any], Callable[[Any, Any, Any], Any]]:
    """``reduce(r)``: the first value as-is, then ``r(agg, value)``; merger ``r(a, b)``."""

    def aggregator(key: Any, value: Any, agg: Any) -> Any:
        return value if agg is None else reducer(agg, value)

    def merger(key: Any, a: Any, b: Any) -> Any:
        return b if a is None else reducer(a, b)

    return (lambda: None), aggregator, merger


def _close_order(item: tuple[Windowed, Any]) -> tuple[int, int, Any]:
    window = item[0]
    return (window.end, window.start, window.key)


class SessionAggregateProcessor(Processor):
    """The session-window aggregate operator; its session store is named ``store_name``."""

    __slots__ = (
        "_counting",
        "_fast",
        "_find",
        "_heap",
        "_progress_dirty",
        "_progress_put",
        "_queue",
        "_replace",
        "_seq",
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
        self._counting = (initializer is _count_init and aggregator is _count_add and merger is _count_merge)
        self.emit_on_close = emit_on_close
        self.store: Any = None
        self.progress: Any = None
        self._progress_put: Any = None
        self.stream_time = _NO_TIME
        self.last_emitted_close = _NO_TIME
        # (end, start, key, seq, entry): entry is the store's entry on the fast path, else None;
        # items in order go to the deque _queue, the others to the heap _heap (see _push)
        self._heap: list[tuple[int, Any, int, int, list[Any] | None]] = []
        self._queue: deque[tuple[int, Any, int, int, list[Any] | None]] = deque()
        self._seq = 0
        self._fast = False
        self._find: Callable[[Any, int, int], list[list[Any]]] = _not_initialised
        self._replace: Callable[[Any, Sequence[list[Any]], int, int, Any], Any] = _not_initialised
        self._progress_dirty = False
        self.dropped_late = 0
        self.dropped_null_key = 0

    def init(self, task: Any) -> None:
        super().init(task)
        store = self.store = task.stores[self.store_name]
        # the stores a task creates: the session-entry operations (a change-logging wrapper's
        # find_mergeable is its inner store's); any other object: the same calls through its public API
        self._fast = isinstance(store, (SessionStore, ChangeLoggingSessionStore))
        if self._fast:
            self._find, self._replace = store.find_mergeable, store.replace_sessions
        else:
            self._find, self._replace = _public_find(store), _public_replace(store)
        self.stream_time = max(_NO_TIME, int(store.observed_stream_time))
        if self.emit_on_close:
            self.progress = task.stores[self.progress_store_name]
            self._progress_put = kv_writer(self.progress)[0]
            last = self.progress.get(LAST_EMITTED_CLOSE)
            self.last_emitted_close = _NO_TIME if last is None else int(last)
            last = self.last_emitted_close
            if self._fast:
                heap = [(e[0], e[1], e[3], 0, e) for e in store.session_entries() if e[0] >= last]
            else:
                with store.all() as sessions:
                    heap = [(w.end, w.start, w.key, 0, None) for w, _ in sessions if w.end >= last]
            self._heap = [(end, start, key, seq, e) for seq, (end, start, key, _, e) in enumerate(heap)]
            self._queue = deque()
            self._seq = len(heap)
            heapq.heapify(self._heap)

    def process(self, key: Any, value: Any, ts: int) -> None:
        if key is None:
            self.dropped_null_key += 1
            self.log_once("null-key", "dropping records with a None key (session aggregation needs a key)")
            return
        stream_time = self.stream_time
        if ts > stream_time:
            self.stream_time = stream_time = ts
        gap = self.gap
        close_time = stream_time - gap - self.grace
        # Entries [end, start, agg, key] of the sessions within gap, ordered by end (find_mergeable).
        found = self._find(key, ts, gap)
        start = end = ts
        if self._counting:  # count(): the same arithmetic as its three functions, without the calls
            agg = 1
            for entry in found:
                if entry[1] < start:
                    start = entry[1]
                if entry[0] > end:
                    end = entry[0]
                agg += entry[2]
            if end < close_time:
                self.dropped_late += 1
                self.note_late(ts, stream_time)
                return
        else:
            try:
                agg = self.initializer()
                if found:
                    merger = self.merger
                    for entry in found:
                        if entry[1] < start:
                            start = entry[1]
                        if entry[0] > end:
                            end = entry[0]
                        agg = merger(key, agg, entry[2])
                if end < close_time:
                    self.dropped_late += 1
                    self.note_late(ts, stream_time)
                    return
                agg = self.aggregator(key, value, agg)
            except Exception as exc:
                raise user_error(self.name, "aggregation function", exc, key) from exc

        merged_away = found and (start != ts or end != ts)
        if self.emit_on_close:
            closing: Sequence[tuple[Windowed, Any]] | None = None
            emitted_below = self.last_emitted_close  # sessions ending before this were emitted
            if close_time > emitted_below:
                heap = self._heap
                queue = self._queue
                closing = (self._take_closing(close_time)
                           if (queue and queue[0][0] < close_time) or (heap and heap[0][0] < close_time) else ())
                emitted_below = close_time
            if self._fast:
                # The heap holds an item for every stored entry that ends at or after emitted_below
                # (an entry extended in place keeps its item, re-keyed when it surfaces), so push
                # only for a new entry, or for an emitted session that this record extends.
                old_end = found[0][0] if len(found) == 1 else None
                entry = self._replace(key, found if merged_away else _NONE, start, end, agg)
                if entry is not None and (old_end is None or entry is not found[0] or old_end < emitted_below):
                    self._seq += 1
                    self._push((end, start, key, self._seq, entry))
            else:
                self._replace(key, found if merged_away else _NONE, start, end, agg)
                if merged_away or not found:
                    self._seq += 1
                    self._push((end, start, key, self._seq, None))
            if closing:
                self._emit_closed(closing, close_time)
            elif closing is not None:
                self.last_emitted_close = close_time
                self._progress_dirty = True
            return

        if merged_away:
            tombstones = [Windowed(entry[3], entry[1], entry[0]) for entry in found]
            self._replace(key, found, start, end, agg)
            forward = self.forward
            for window in tombstones:
                forward(window, None, window.end)
            forward(_windowed(Windowed, (key, start, end)), agg, end)
        else:
            self._replace(key, _NONE, start, end, agg)
            self.forward(_windowed(Windowed, (key, start, end)), agg, end)

    def _push(self, item: tuple[int, Any, int, int, list[Any] | None]) -> None:
        """Queue ``item``: on the deque when it orders after the deque's last item, else on the heap."""
        queue = self._queue
        if not queue or queue[-1] < item:
            queue.append(item)
        else:
            heapq.heappush(self._heap, item)

    def _take_closing(self, close_time: int) -> list[tuple[Windowed, Any]]:
        """Take the items with ``end < close_time`` (the smallest of the deque's and the heap's
        fronts first) and read (before expiry) those sessions the store still has, in
        ``(end, start, key)`` order; sessions ending before ``last_emitted_close``
        are not emitted (with the initial -1, those ending before -1: negative event times).

        Fast path: an item carries the store's entry; a removed or expired entry (agg None) is
        skipped, an entry extended in place since its item was pushed is pushed again under its
        current window. Otherwise the session is read with ``fetch_session`` (duplicates, a window
        put twice, are adjacent and read once)."""
        heap = self._heap
        queue = self._queue
        fetch = self.store.fetch_session
        out = []
        previous = None
        pop = heapq.heappop
        lowest = self.last_emitted_close  # only ends in [last_emitted_close, close_time) are emitted
        moved = False  # an item re-queued under a smaller start may follow items it orders before
        while True:
            if heap and (not queue or heap[0] < queue[0]):
                if heap[0][0] >= close_time:
                    break
                end, start, key, _, entry = pop(heap)
            elif queue and queue[0][0] < close_time:
                end, start, key, _, entry = queue.popleft()
            else:
                break
            if entry is not None:
                agg = entry[2]
                if agg is None:
                    continue
                if entry[0] != end or entry[1] != start:
                    self._seq += 1
                    self._push((entry[0], entry[1], key, self._seq, entry))
                    moved = True
                    continue
                if end >= lowest:
                    out.append((_windowed(Windowed, (key, start, end)), agg))
                continue
            if (end, start, key) == previous or end < lowest:
                continue
            previous = (end, start, key)
            agg = fetch(key, start, end)
            if agg is not None:
                out.append((_windowed(Windowed, (key, start, end)), agg))
        if moved and len(out) > 1:
            out.sort(key=_close_order)
        return out

    def _emit_closed(self, closing: Sequence[tuple[Windowed, Any]], close_time: int) -> None:
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
