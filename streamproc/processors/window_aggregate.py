"""Time-window aggregation (tumbling and hopping windows) on a KIP-428 window store: docs/windows.md.

For each record ``(key, value, ts)``:

1. ``key is None``: dropped (``dropped_records_null_key``); ``ts < 0``: dropped
   (``dropped_records_negative_timestamp``; window starts are never negative).
2. ``stream_time = max(stream_time, ts)``; ``close_time = stream_time - grace``.
3. For every window ``[start, start + size)`` containing ``ts`` (starts are the multiples of
   ``advance``), by start: if ``start + size <= close_time`` the window is closed and skipped
   (``skipped_late_windows``); else ``agg = aggregator(key, value, old or initializer())`` is stored
   with the window's timestamp ``max(ts, old timestamp)`` (the largest record timestamp in it).
   A record that updated no window is late: dropped and counted (``dropped_records_late``).
4. ``ON_WINDOW_UPDATE``: each update is forwarded as ``(Windowed(key, start, start + size), agg)``
   with the window's timestamp. ``ON_WINDOW_CLOSE``: nothing on update; each window is forwarded
   exactly once, by the record that moves ``close_time`` to or past its end, with timestamp
   ``start + size - 1`` (the last instant the window covers), ordered by start then key.

The store holds :class:`ValueAndTimestamp` ``(aggregate, timestamp)`` per ``(key, window start)``;
its changelog value is the 8-byte timestamp + a presence byte + the aggregate's bytes. Stream time is
recovered after a restore from the timestamps of the newest windows; ``ON_WINDOW_CLOSE`` keeps its
progress (``last_emitted_close``) in a key-value store written at the end of every batch. Closing
windows are read just before the puts that move the store's observed time (and may expire them with
the default retention ``size + grace``).

All user functions run before the store changes, so one that raises (reported as
:class:`~streamproc.errors.ProcessingError`) leaves the state as it was.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from ..records import Windowed
from ..serde import Serde
from .base import Processor, kv_writer, user_error

__all__ = ["LAST_EMITTED_CLOSE", "TimeWindowAggregateProcessor", "ValueAndTimestamp", "timestamped_serde"]

#: Key of ``last_emitted_close`` in the operator's progress store.
LAST_EMITTED_CLOSE = "last_emitted_close"
_NO_TIME = -1
_TS = struct.Struct(">q")


class ValueAndTimestamp(NamedTuple):
    """A stored window aggregate and the largest timestamp of the records aggregated into it."""

    value: Any
    timestamp: int


def timestamped_serde(inner: Serde) -> Serde:
    """Serde of :class:`ValueAndTimestamp`: 8-byte big-endian timestamp, ``0x01`` + the value's bytes
    through ``inner`` (``0x00`` alone for a None value)."""
    where = f"window aggregate value ({inner.name})"

    def to_bytes(vt: Any) -> bytes:
        value, ts = vt
        raw = inner.serialize(value, where)
        return _TS.pack(ts) + (b"\x00" if raw is None else b"\x01" + raw)

    def from_bytes(data: bytes) -> ValueAndTimestamp:
        if len(data) < 9:
            raise ValueError(f"expected at least 9 bytes (timestamp + presence byte), got {len(data)}")
        ts = _TS.unpack_from(data, 0)[0]
        value = inner.deserialize(bytes(data[9:]), where) if data[8] == 1 else None
        return ValueAndTimestamp(value, ts)

    return Serde(f"timestamped({inner.name})", to_bytes, from_bytes)


class TimeWindowAggregateProcessor(Processor):
    """The time-window aggregate operator; its window store is named ``store_name``."""

    __slots__ = (
        "_progress_dirty",
        "_progress_put",
        "_put",
        "advance",
        "aggregator",
        "dropped_late",
        "dropped_negative_ts",
        "dropped_null_key",
        "emit_on_close",
        "grace",
        "initializer",
        "last_emitted_close",
        "progress",
        "progress_store_name",
        "size",
        "skipped_late_windows",
        "store",
        "store_name",
        "stream_time",
    )

    def __init__(self, name: str, store_name: str, size: int, advance: int, grace: int,
                 initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                 emit_on_close: bool = False, progress_store_name: str | None = None) -> None:
        super().__init__(name)
        if emit_on_close and progress_store_name is None:
            raise ValueError(f"time-window aggregate {name!r} emitting on window close needs a progress store")
        if not 0 < advance <= size:
            raise ValueError(f"time-window aggregate {name!r}: need 0 < advance <= size, got advance={advance}, "
                             f"size={size}")
        self.store_name = store_name
        self.progress_store_name = progress_store_name
        self.size = size
        self.advance = advance
        self.grace = grace
        self.initializer = initializer
        self.aggregator = aggregator
        self.emit_on_close = emit_on_close
        self.store: Any = None
        self.progress: Any = None
        self._put: Any = None
        self._progress_put: Any = None
        self.stream_time = _NO_TIME
        self.last_emitted_close = _NO_TIME
        self._progress_dirty = False
        self.dropped_late = 0
        self.dropped_null_key = 0
        self.dropped_negative_ts = 0
        self.skipped_late_windows = 0

    @property
    def needs_flush(self) -> bool:  # type: ignore[override]
        return self.emit_on_close

    def init(self, task: Any) -> None:
        super().init(task)
        store = self.store = task.stores[self.store_name]
        if hasattr(store, "set_record_timestamp"):
            put = store.put
            self._put = lambda k, v, start, ts: put(k, v, start, timestamp=ts)
        else:
            plain_put = store.put
            self._put = lambda k, v, start, ts: plain_put(k, v, start)
        inner = getattr(store, "inner", store)
        newest = inner.observed_stream_time
        if newest >= 0:
            # the newest window holds the record that set stream time (it is never closed nor expired)
            with inner.fetch_all(newest, newest) as windows:
                self.stream_time = max((vt.timestamp for _, vt in windows), default=_NO_TIME)
        if self.emit_on_close:
            self.progress = task.stores[self.progress_store_name]
            self._progress_put = kv_writer(self.progress)[0]
            last = self.progress.get(LAST_EMITTED_CLOSE)
            self.last_emitted_close = _NO_TIME if last is None else int(last)

    def process(self, key: Any, value: Any, ts: int) -> None:
        if key is None:
            self.dropped_null_key += 1
            self.log_once("null-key", "dropping records with a None key (time-window aggregation needs a key)")
            return
        if ts < 0:
            self.dropped_negative_ts += 1
            self.log_once("negative-timestamp", "dropping records with a negative timestamp (windows start at 0)")
            return
        self.stream_time = max(self.stream_time, ts)
        close_time = self.stream_time - self.grace
        size = self.size
        advance = self.advance
        if advance == size:                           # tumbling: one window
            start = ts // size * size
            if start + size <= close_time:
                self.skipped_late_windows += 1
                self.dropped_late += 1
                self.note_late(ts, self.stream_time)
                if self.emit_on_close and close_time > self.last_emitted_close:
                    self._emit_closed(self._closing(close_time), close_time)
                return
            updates = [(start, self._updated(key, value, ts, start))]
        else:
            first = ts - size + advance
            first = first // advance * advance if first > 0 else 0
            updates = []
            for start in range(first, ts + 1, advance):
                if start + size <= close_time:
                    self.skipped_late_windows += 1
                else:
                    updates.append((start, self._updated(key, value, ts, start)))
            if not updates:
                self.dropped_late += 1
                self.note_late(ts, self.stream_time)
        put = self._put
        if self.emit_on_close:
            closing = self._closing(close_time) if close_time > self.last_emitted_close else None
            for start, vt in updates:
                put(key, vt, start, ts)
            if closing is not None:
                self._emit_closed(closing, close_time)
            return
        forward = self.forward
        for start, vt in updates:
            put(key, vt, start, ts)
            forward(Windowed(key, start, start + size), vt.value, vt.timestamp)

    def _updated(self, key: Any, value: Any, ts: int, start: int) -> ValueAndTimestamp:
        """The window's new aggregate and timestamp (the store is not changed yet)."""
        old = self.store.get(key, start)
        try:
            if old is None:
                return ValueAndTimestamp(self.aggregator(key, value, self.initializer()), ts)
            return ValueAndTimestamp(self.aggregator(key, value, old.value),
                                     max(old.timestamp, ts))
        except Exception as exc:
            raise user_error(self.name, "aggregation function", exc, key) from exc

    def _closing(self, close_time: int) -> list[Any]:
        """The windows that close now (``last_emitted_close < end <= close_time``), by start then key,
        read before this record's puts can expire them."""
        size, advance = self.size, self.advance
        lo = self.last_emitted_close - size + 1
        hi = close_time - size
        first = -(-lo // advance) * advance      # the smallest window start >= lo
        if first > hi or hi < 0:
            return []
        with self.store.fetch_all(max(first, 0), hi) as windows:
            return list(windows)

    def _emit_closed(self, closing: list[Any], close_time: int) -> None:
        self.last_emitted_close = close_time
        self._progress_dirty = True
        forward = self.forward
        for window, vt in closing:
            forward(window, vt.value, window.end - 1)

    def flush(self) -> None:
        if self._progress_dirty:
            self._progress_dirty = False
            self._progress_put(LAST_EMITTED_CLOSE, self.last_emitted_close, self.stream_time)

    def metrics(self) -> dict[str, int]:
        return {"dropped_records_late": self.dropped_late, "dropped_records_null_key": self.dropped_null_key,
                "dropped_records_negative_timestamp": self.dropped_negative_ts,
                "skipped_late_windows": self.skipped_late_windows}
