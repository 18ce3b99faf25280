"""Table sources and the stream-table join (docs/semantics.md, "Versioned store" and "Versioned tables and as-of joins")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sortedcontainers import SortedList

from ..errors import ProcessingError
from .base import Processor, kv_writer, user_error
from .origin import origin_of, released_error
from .window_aggregate import ValueAndTimestamp

__all__ = ["BUFFER_TIME", "VALID_TO_UNDEFINED", "StreamTableJoinProcessor", "TableSourceProcessor"]

#: ``put`` result of a versioned store when the new version is the newest (docs/semantics.md, "Versioned store").
VALID_TO_UNDEFINED = -1
#: Key of the join buffer's stream time in the join's progress store.
BUFFER_TIME = "buffer_time"


class TableSourceProcessor(Processor):
    """Materialises a table topic into its store and forwards the table's updates.

    Versioned table: ``store.put(key, value, ts)``; only a version that became the newest (put
    returned ``VALID_TO_UNDEFINED``) is forwarded: out-of-order and expired updates change history
    but not the table's current value. Key-value table: every update is stored and forwarded.
    ``value=None`` is a delete (a tombstone version). Records with a ``None`` key are dropped.

    ``timestamped``: the key-value store holds ``ValueAndTimestamp`` (a table another table joins
    with needs its rows' timestamps). ``send_old_values``: ``old_value`` holds the key's previous
    value while an update is forwarded (table operators downstream need it, see
    :mod:`~streamproc.processors.table_ops`).
    """

    __slots__ = ("_put", "dropped_null_key", "old_value", "send_old_values", "store", "store_name", "timestamped",
                 "versioned")

    def __init__(self, name: str, store_name: str, versioned: bool, timestamped: bool = False,
                 send_old_values: bool = False) -> None:
        super().__init__(name)
        self.store_name = store_name
        self.versioned = versioned
        self.timestamped = timestamped
        self.send_old_values = send_old_values
        self.store: Any = None
        self._put: Any = None
        self.dropped_null_key = 0
        self.old_value: Any = None

    def init(self, task: Any) -> None:
        super().init(task)
        self.store = task.stores[self.store_name]
        if not self.versioned:
            self._put = kv_writer(self.store)[0]

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None:
            self.dropped_null_key += 1
            self.log_once("null-key", "dropping table records with a None key")
            return
        if self.send_old_values:
            old = self.store.get(key)
            self.old_value = old if old is None or not (self.versioned or self.timestamped) else old.value
        if self.versioned:
            if self.store.put(key, value, timestamp) == VALID_TO_UNDEFINED:
                self.forward(key, value, timestamp)
        else:
            self._put(key, value if value is None or not self.timestamped else ValueAndTimestamp(value, timestamp),
                      timestamp)
            self.forward(key, value, timestamp)

    def metrics(self) -> dict[str, int]:
        return {"dropped_records_null_key": self.dropped_null_key}


class StreamTableJoinProcessor(Processor):
    """``stream.join(table, joiner, grace)`` / ``left_join``.

    For each stream record ``(k, v, ts)``: inner drops ``k is None`` or ``v is None``; left drops
    only ``v is None`` and joins a ``None`` key at once with ``None``. The table value is
    ``store.get(k, as_of=ts)`` (versioned) or ``store.get(k)``. Inner emits iff the table has a
    value; left always emits. Output keeps the stream key and timestamp.

    With ``grace=G``: ``buffer_time = max(buffer_time, ts)`` over the records that reach the buffer;
    a record with ``ts < buffer_time - G`` is joined at once; else it is stored in the buffer
    (a key-value store keyed ``(ts, key, arrival)``) and every buffered record with
    ``ts <= buffer_time - G`` is then joined in ``(ts, key, arrival)`` order against the table as it
    is at that moment. ``buffer_time`` is written to the progress store at the end of every batch,
    so both survive restart. ``buffer_time`` only counts records that reach the buffer (records
    dropped for a None key or value do not move it).

    A buffered entry's value is ``(value, origin)``: the record's
    :class:`~streamproc.processors.origin.Origin` (position, raw key and value, headers), stored and
    change-logged with it. When joining a released record raises a
    :class:`~streamproc.errors.ProcessingError` (the joiner, or an operator downstream), the error
    names that record's origin and goes to the task's ``released_error_handler`` (see
    :func:`~streamproc.processors.origin.released_error`); the released record is consumed either
    way, and the record being processed goes on unless there is no handler.
    """

    __slots__ = (
        "_buffer_delete",
        "_buffer_put",
        "_lookup",
        "_pending",
        "_progress_dirty",
        "_progress_put",
        "_seq",
        "buffer",
        "buffer_store_name",
        "buffer_time",
        "dropped_null_key",
        "dropped_null_value",
        "grace",
        "joiner",
        "left",
        "progress",
        "progress_store_name",
        "table",
        "table_store_name",
        "timestamped",
        "versioned",
    )

    def __init__(self, name: str, table_store_name: str, joiner: Callable[[Any, Any], Any], left: bool,
                 versioned: bool, grace: int | None = None, buffer_store_name: str | None = None,
                 progress_store_name: str | None = None, timestamped: bool = False) -> None:
        super().__init__(name)
        #: the table's store holds ``ValueAndTimestamp`` (an aggregation's table, or a table joined with a table)
        self.timestamped = timestamped
        if grace is not None and (buffer_store_name is None or progress_store_name is None):
            raise ValueError(f"join {name!r} with grace needs a buffer store and a progress store")
        self.table_store_name = table_store_name
        self.joiner = joiner
        self.left = left
        self.versioned = versioned
        self.grace = grace
        self.buffer_store_name = buffer_store_name
        self.progress_store_name = progress_store_name
        self.table: Any = None
        self.buffer: Any = None
        self.progress: Any = None
        self.buffer_time = -1
        self._pending: SortedList = SortedList()
        self._seq = 0
        self._progress_dirty = False
        self._lookup: Callable[[Any, int], Any] = self._lookup_latest
        self.dropped_null_key = 0
        self.dropped_null_value = 0

    def init(self, task: Any) -> None:
        super().init(task)
        self.table = task.stores[self.table_store_name]
        self._lookup = self._lookup_as_of if self.versioned else self._lookup_latest
        if self.grace is not None:
            self.buffer = task.stores[self.buffer_store_name]
            self.progress = task.stores[self.progress_store_name]
            self._buffer_put, self._buffer_delete = kv_writer(self.buffer)
            self._progress_put = kv_writer(self.progress)[0]
            known = self.progress.get(BUFFER_TIME)
            self.buffer_time = -1 if known is None else int(known)
            inner = getattr(self.buffer, "inner", self.buffer)
            with inner.all() as entries:
                self._pending = SortedList(tuple(k) for k, _ in entries)
            self._seq = (max(k[2] for k in self._pending) + 1) if self._pending else 0

    def _lookup_as_of(self, key: Any, ts: int) -> Any:
        found = self.table.get(key, ts)
        return None if found is None else found.value

    def _lookup_latest(self, key: Any, ts: int) -> Any:
        found = self.table.get(key)
        return found.value if self.timestamped and found is not None else found

    def _join(self, key: Any, value: Any, ts: int) -> None:
        table_value = None if key is None else self._lookup(key, ts)
        if table_value is None and not self.left:
            return
        try:
            joined = self.joiner(value, table_value)
        except Exception as exc:
            raise user_error(self.name, "joiner", exc, key) from exc
        self.forward(key, joined, ts)

    def process(self, key: Any, value: Any, ts: int) -> None:
        if value is None:
            self.dropped_null_value += 1
            self.log_once("null-value", "dropping stream records with a None value (nothing to join)")
            return
        if key is None:
            if self.left:
                self._join(None, value, ts)
            else:
                self.dropped_null_key += 1
                self.log_once("null-key", "dropping stream records with a None key (inner join)")
            return
        grace = self.grace
        if grace is None:
            self._join(key, value, ts)
            return
        if ts > self.buffer_time:
            self.buffer_time = ts
            self._progress_dirty = True
        limit = self.buffer_time - grace
        if ts < limit:
            self._join(key, value, ts)
            return
        entry = (ts, key, self._seq)
        self._seq += 1
        self._buffer_put(entry, (value, origin_of(self.task.current)), ts)  # type: ignore[union-attr]
        pending = self._pending
        pending.add(entry)
        while pending and pending[0][0] <= limit:
            head = pending.pop(0)
            buffered, origin = self._buffer_delete(head, ts)
            try:
                self._join(head[1], buffered, head[0])
            except ProcessingError as exc:
                released_error(self.task, exc, origin, self.name)

    @property
    def needs_flush(self) -> bool:  # type: ignore[override]
        return self.grace is not None

    def flush(self) -> None:
        if self._progress_dirty:
            self._progress_dirty = False
            self._progress_put(BUFFER_TIME, self.buffer_time, self.buffer_time)

    def metrics(self) -> dict[str, int]:
        return {"dropped_records_null_key": self.dropped_null_key,
                "dropped_records_null_value": self.dropped_null_value}
