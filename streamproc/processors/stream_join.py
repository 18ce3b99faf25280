"""Windowed stream-stream join (inner, left, outer) on two KIP-428 window stores: docs/windows.md,
docs/semantics.md ("Stream-stream joins").

Each side of the join is one :class:`StreamStreamJoinProcessor` (``side`` LEFT or RIGHT); both use
the same stores: the left and right buffers (window stores with duplicates, keyed by the record key,
window start = record timestamp) and, for left/outer joins, the *unmatched* store. A left record at
``ts1`` and a right record at ``ts2`` are in each other's window when
``ts1 - before <= ts2 <= ts1 + after``. A side's *extent* is how far past a record's timestamp its
window reaches: ``after`` for left records, ``before`` for right ones.

Stream time ``T`` is shared: the largest timestamp of any accepted record of either side, i.e. the
larger observed time of the two buffers (so it needs no state of its own and survives restore).
For each record ``(k, v, ts)``:

1. ``v is None``: dropped (``dropped_records_null_value``). ``k is None``: joined at once with
   ``None`` when its side is outer (left side of a left join, both sides of an outer join), else
   dropped (``dropped_records_null_key``). Neither moves stream time.
2. ``T = max(T, ts)``. If ``ts < T - (extent(side) + grace)`` the record is late: dropped, counted
   (``dropped_records_late``) and warned about once.
3. If ``T`` moved: every unmatched record of an outer side with ``t < T - (before + after + grace)``
   (no record accepted from now on can be in its window) is forwarded as ``joiner(v, None)`` (left)
   / ``joiner(None, v)`` (right) with its own timestamp, ordered by (timestamp, left before right,
   key, arrival), and forgotten.
4. The record joins **every** buffered record of the other side with key ``k`` in its window,
   ordered by (timestamp, arrival): ``joiner(left_value, right_value)``, timestamp
   ``max(ts1, ts2)``, key ``k``. Partners that were unmatched are matched now.
5. A record of an outer side that joined nothing is remembered as unmatched; then the record is
   buffered.

Contract: every pair of accepted records with equal keys inside each other's window joins exactly
once, whatever their arrival order (the later-arriving one finds the earlier in the buffer); an
unmatched record of an outer side is emitted exactly once, by the first record that moves ``T``
past ``t + before + after + grace``, and never when it has joined (before or after that instant no
partner can arrive: step 3 runs before step 4). Buffers keep ``before + after + grace + 1`` ms of
stream time: every record an accepted record can still join (an accepted left record at
``t >= T - after - grace`` reaches back to ``t - before``; a right one symmetrically). The unmatched
store is a key-value store ``(side, ts, key) -> (side, values)``.

Reads never scan: each side keeps a :class:`~streamproc.processors.join_index.BufferIndex` of its
buffer (key -> records by timestamp) and a heap ``(ts, seq, key)`` of its unmatched entries (entries
matched since are skipped when popped); both are rebuilt from the stores when the task starts. Each
side is the only writer of its own buffer, index and heap; the other side reads them.

All joiner calls for the record being processed happen before the stores change: a joiner that
raises on it leaves the state as it was. An unmatched record keeps its
:class:`~streamproc.processors.origin.Origin` in the unmatched store (change-logged with it); when
the joiner raises on it as it is released with a ``None`` partner (or an operator downstream raises
on that result), the :class:`~streamproc.errors.ProcessingError` names the unmatched record's
position and goes to the task's ``released_error_handler``: that record is consumed (nothing is
forwarded for it) and processing goes on. Without a handler the error propagates with the
unmatched record's position and, as for the record's own joiner, the state is left as it was.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Callable
from typing import Any

from ..errors import ProcessingError
from ..serde import Serde
from .base import Processor, kv_writer, user_error
from .join_index import BufferIndex
from .origin import UNKNOWN_ORIGIN, decode_origin, encode_origin, origin_of, released_error

__all__ = ["LEFT", "RIGHT", "StreamStreamJoinProcessor", "unmatched_key_serde", "unmatched_value_serde"]

LEFT = 0
RIGHT = 1
_SIDE_TS = struct.Struct(">Bq")
_COUNT = struct.Struct(">I")


def unmatched_key_serde(key_serde: Serde) -> Serde:
    """Keys ``(side, timestamp, key)`` of the unmatched store: 1-byte side, 8-byte timestamp, key bytes."""
    where = "unmatched-join-store key"

    def to_bytes(value: Any) -> bytes:
        side, ts, key = value
        return _SIDE_TS.pack(side, ts) + (key_serde.serialize(key, where) or b"")

    def from_bytes(data: bytes) -> tuple[int, int, Any]:
        side, ts = _SIDE_TS.unpack_from(data, 0)
        return (side, ts, key_serde.deserialize(bytes(data[_SIDE_TS.size:]), where))

    return Serde(f"unmatched-key({key_serde.name})", to_bytes, from_bytes)


_WITH_ORIGINS = 0x10     # side byte flag: each value is followed by its origin


def unmatched_value_serde(left_serde: Serde, right_serde: Serde) -> Serde:
    """Values ``(side, ((v, origin), ...))`` of the unmatched store: 1 byte ``0x10 | side``, then per
    value a 4-byte length + its bytes through that side's serde, then its
    :class:`~streamproc.processors.origin.Origin`. A record written before origins were kept (first
    byte ``side``, values without origins) restores with :data:`UNKNOWN_ORIGIN`."""
    serdes = (left_serde, right_serde)
    where = "unmatched-join-store value"

    def to_bytes(entry: Any) -> bytes:
        side, values = entry
        serde = serdes[side]
        parts = [bytes((_WITH_ORIGINS | side,))]
        for v, origin in values:
            raw = serde.serialize(v, where) or b""
            parts.append(_COUNT.pack(len(raw)))
            parts.append(raw)
            parts.append(encode_origin(origin))
        return b"".join(parts)

    def from_bytes(data: bytes) -> tuple[int, tuple[Any, ...]]:
        with_origins = bool(data[0] & _WITH_ORIGINS)
        side = data[0] & 1
        serde = serdes[side]
        pos, values = 1, []
        while pos < len(data):
            (n,) = _COUNT.unpack_from(data, pos)
            pos += _COUNT.size
            v = serde.deserialize(bytes(data[pos:pos + n]), where)
            pos += n
            origin = UNKNOWN_ORIGIN
            if with_origins:
                origin, pos = decode_origin(data, pos)
            values.append((v, origin))
        return (side, tuple(values))

    return Serde(f"unmatched-value({left_serde.name}, {right_serde.name})", to_bytes, from_bytes)


class StreamStreamJoinProcessor(Processor):
    """One side of a windowed stream-stream join (see the module docstring for the rules)."""

    __slots__ = (
        "_other_inner",
        "_pending_seq",
        "_put",
        "_this_inner",
        "_unmatched_delete",
        "_unmatched_put",
        "close_after",
        "dropped_late",
        "dropped_null_key",
        "dropped_null_value",
        "index",
        "joiner",
        "other_outer",
        "other_store_name",
        "outer_sides",
        "pending",
        "sibling",
        "sibling_name",
        "side",
        "this_after",
        "this_before",
        "this_lag",
        "this_outer",
        "this_store_name",
        "unmatched",
        "unmatched_store_name",
    )

    def __init__(self, name: str, side: int, left_store_name: str, right_store_name: str,
                 unmatched_store_name: str | None, joiner: Callable[[Any, Any], Any],
                 before: int, after: int, grace: int, left_outer: bool, right_outer: bool,
                 sibling_name: str) -> None:
        super().__init__(name)
        if side not in (LEFT, RIGHT):
            raise ValueError(f"stream-stream join {name!r}: side must be LEFT (0) or RIGHT (1), got {side!r}")
        if (left_outer or right_outer) and unmatched_store_name is None:
            raise ValueError(f"stream-stream join {name!r}: a left/outer join needs an unmatched store")
        self.side = side
        self.sibling_name = sibling_name
        self.joiner = joiner
        self.close_after = before + after + grace               # unmatched records close this long after their ts
        self.outer_sides = tuple(s for s, outer in ((LEFT, left_outer), (RIGHT, right_outer)) if outer)
        if side == LEFT:
            self.this_store_name, self.other_store_name = left_store_name, right_store_name
            self.this_before, self.this_after = before, after
            self.this_outer, self.other_outer = left_outer, right_outer
        else:
            self.this_store_name, self.other_store_name = right_store_name, left_store_name
            self.this_before, self.this_after = after, before
            self.this_outer, self.other_outer = right_outer, left_outer
        self.this_lag = (after if side == LEFT else before) + grace   # later than T - this_lag is on time
        self.unmatched_store_name = unmatched_store_name
        self.unmatched: Any = None
        self.sibling: StreamStreamJoinProcessor | None = None
        self.index: BufferIndex | None = None           # of this side's buffer
        self.pending: list[tuple[int, int, Any]] = []    # heap of this side's unmatched entries
        self._pending_seq = 0
        self._this_inner: Any = None
        self._other_inner: Any = None
        self._put: Any = None
        self._unmatched_put: Any = None
        self._unmatched_delete: Any = None
        self.dropped_late = 0
        self.dropped_null_key = 0
        self.dropped_null_value = 0

    def init(self, task: Any) -> None:
        super().init(task)
        this = task.stores[self.this_store_name]
        other = task.stores[self.other_store_name]
        self._this_inner = getattr(this, "inner", this)
        self._other_inner = getattr(other, "inner", other)
        if hasattr(this, "set_record_timestamp"):
            put = this.put
            self._put = lambda k, v, ts: put(k, v, ts, timestamp=ts)
        else:
            plain_put = this.put
            self._put = lambda k, v, ts: plain_put(k, v, ts)
        if self.unmatched_store_name is not None:
            self.unmatched = task.stores[self.unmatched_store_name]
            self._unmatched_put, self._unmatched_delete = kv_writer(self.unmatched)
        sibling = task.processors.get(self.sibling_name)
        if not isinstance(sibling, StreamStreamJoinProcessor):
            raise ValueError(f"stream-stream join {self.name!r}: its other side {self.sibling_name!r} is not in "  # noqa: TRY004
                             f"the task")
        self.sibling = sibling
        # whichever side starts first builds both sides' in-memory state from the (restored) stores
        self.build_state(self._this_inner, self.unmatched)
        sibling.build_state(self._other_inner, self.unmatched)

    def build_state(self, buffer: Any, unmatched: Any) -> None:
        """Build this side's in-memory state once: its buffer index (``index``) from ``buffer`` (its
        window store, unwrapped) and, for an outer side, its heap of unmatched entries
        (``pending``) from the ``unmatched`` store (None: none). A no-op when ``index`` is already
        built, so either side's ``init`` may build both."""
        if self.index is not None:
            return
        self.index = BufferIndex(buffer.retention)
        self.index.load(buffer)
        if self.this_outer and unmatched is not None:
            inner = getattr(unmatched, "inner", unmatched)
            with inner.range((self.side,), (self.side + 1,)) as entries:
                for (_, ts, key), _ in entries:
                    self.push_pending(ts, key)

    def push_pending(self, ts: int, key: Any) -> None:
        """Queue an unmatched entry of this side (record timestamp ``ts``, ``key``) on ``pending``,
        the heap ordered by timestamp then arrival (keys are never compared); the sibling side
        calls it too, when it puts popped entries back."""
        seq = self._pending_seq
        self._pending_seq = seq + 1
        heapq.heappush(self.pending, (ts, seq, key))   # seq is unique: keys are never compared

    def _pair(self, this_value: Any, other_value: Any) -> Any:
        return self.joiner(this_value, other_value) if self.side == LEFT else self.joiner(other_value, this_value)

    def process(self, key: Any, value: Any, ts: int) -> None:
        if value is None:
            self.dropped_null_value += 1
            self.log_once("null-value", "dropping records with a None value (nothing to join)")
            return
        if key is None:
            if self.this_outer:
                try:
                    joined = self._pair(value, None)
                except Exception as exc:
                    raise user_error(self.name, "joiner", exc, key) from exc
                self.forward(None, joined, ts)
            else:
                self.dropped_null_key += 1
                self.log_once("null-key", "dropping records with a None key (they cannot join)")
            return
        t_old = max(self._this_inner.observed_stream_time, self._other_inner.observed_stream_time)
        t = max(t_old, ts)
        if ts < t - self.this_lag:
            self.dropped_late += 1
            self.note_late(ts, t)
            self.log_once("late", f"dropping late records: a record's timestamp must be >= stream time - "
                                  f"{self.this_lag} ms (its side's window extent + grace); raise the JoinWindows' "
                                  f"grace to accept records this much out of order")
            return
        partners = self.sibling.index.fetch(key, ts - self.this_before, ts + self.this_after)  # type: ignore[union-attr]
        closed = self._closed_unmatched(t) if t > t_old and self.outer_sides else None
        try:
            joined = [self._pair(value, other_value) for _, other_value in partners]
        except Exception as exc:
            if closed:
                self._unpop(closed, ts)
            raise user_error(self.name, "joiner", exc, key) from exc

        forward = self.forward
        if closed:
            delete = self._unmatched_delete
            for entry_key, outputs, _ in closed:
                delete(entry_key, ts)
                for out_key, out_value, out_ts, origin in outputs:
                    try:
                        forward(out_key, out_value, out_ts)
                    except ProcessingError as exc:      # downstream, on the released result
                        released_error(self.task, exc, origin, self.name)
        if partners:
            for (other_ts, _), out in zip(partners, joined):
                forward(key, out, max(ts, other_ts))
            if self.other_outer:
                self._mark_matched(key, partners, ts)
        elif self.this_outer:
            entry_key = (self.side, ts, key)
            known = self.unmatched.get(entry_key)
            item = (value, origin_of(self.task.current))  # type: ignore[union-attr]
            if known is None:
                self._unmatched_put(entry_key, (self.side, (item,)), ts)
                self.push_pending(ts, key)
            else:
                self._unmatched_put(entry_key, (self.side, known[1] + (item,)), ts)
        self._put(key, value, ts)
        index = self.index
        index.add(key, ts, value)  # type: ignore[union-attr]
        index.expire(self._this_inner.observed_stream_time)  # type: ignore[union-attr]

    def _closed_unmatched(self, t: int) -> list[tuple[Any, list[tuple[Any, Any, int, Any]], tuple[Any, ...] | None]]:
        """Pop the unmatched entries that no record accepted at stream time ``t`` or later can join
        (``ts < t - (before + after + grace)``) from the heaps of the outer sides and return those
        still unmatched, ordered by (timestamp, side, key), as ``(entry key, outputs, kept)``:
        ``outputs`` ``(key, joined, ts, origin)`` per value; ``kept`` is None, or (when the joiner
        raised on some values and the task's ``released_error_handler`` took them) the values that
        did not fail. Without a handler the first failure is raised, the heaps as they were."""
        found: list[tuple[int, int, Any]] = []
        threshold = t - self.close_after
        for side in self.outer_sides:
            owner = self if side == self.side else self.sibling
            heap = owner.pending  # type: ignore[union-attr]
            while heap and heap[0][0] < threshold:
                ts, _, key = heapq.heappop(heap)
                found.append((ts, side, key))
        if not found:
            return []
        if len(found) > 1:
            found.sort(key=lambda e: (e[0], e[1]))   # stable: keys of one (ts, side) stay in heap order
            found = _sorted_by_key_within(found)
        out: list[tuple[Any, list[tuple[Any, Any, int, Any]], tuple[Any, ...] | None]] = []
        get = self.unmatched.get
        joiner = self.joiner
        task = self.task
        previous = None
        for ts, side, key in found:
            entry_key = (side, ts, key)
            if entry_key == previous:
                continue                              # an entry re-created after a match: one heap item each
            previous = entry_key
            entry = get(entry_key)
            if entry is None:
                continue                              # matched since it was added
            outputs = []
            kept: list[Any] | None = None
            for i, (v, origin) in enumerate(entry[1]):
                try:
                    joined = joiner(v, None) if side == LEFT else joiner(None, v)
                except Exception as exc:  # noqa: BLE001 - the user function failed: handed on below
                    error = user_error(self.name, "joiner", exc, key)
                    error.__cause__ = exc
                    if getattr(task, "released_error_handler", None) is None:
                        for f_ts, f_side, f_key in found:
                            owner = self if f_side == self.side else self.sibling
                            owner.push_pending(f_ts, f_key)  # type: ignore[union-attr]
                    released_error(task, error, origin, self.name)   # raises without a handler
                    if kept is None:
                        kept = [item for item, _ in zip(entry[1], range(i))]
                    continue
                outputs.append((key, joined, ts, origin))
                if kept is not None:
                    kept.append((v, origin))
            out.append((entry_key, outputs, None if kept is None else tuple(kept)))
        return out

    def _unpop(self, closed: list[tuple[Any, list[tuple[Any, Any, int, Any]], tuple[Any, ...] | None]],
               ts: int) -> None:
        """Put closed entries back on their heaps (the record's own joiner raised). Values already
        handed to the ``released_error_handler`` stay consumed: they leave the stored entry."""
        for (side, entry_ts, key), _, kept in closed:
            if kept is not None:
                entry_key = (side, entry_ts, key)
                if kept:
                    self._unmatched_put(entry_key, (side, kept), ts)
                else:
                    self._unmatched_delete(entry_key, ts)
                    continue
            owner = self if side == self.side else self.sibling
            owner.push_pending(entry_ts, key)  # type: ignore[union-attr]

    def _mark_matched(self, key: Any, partners: list[Any], ts: int) -> None:
        unmatched = self.unmatched
        other_side = 1 - self.side
        previous = None
        for other_ts, _ in partners:
            if other_ts == previous:
                continue
            previous = other_ts
            entry_key = (other_side, other_ts, key)
            if entry_key in unmatched:
                self._unmatched_delete(entry_key, ts)

    def metrics(self) -> dict[str, int]:
        return {"dropped_records_late": self.dropped_late, "dropped_records_null_key": self.dropped_null_key,
                "dropped_records_null_value": self.dropped_null_value}


def _sorted_by_key_within(found: list[tuple[int, int, Any]]) -> list[tuple[int, int, Any]]:
    """``found`` sorted by (ts, side), each run of equal (ts, side) sorted by key (keys of one store
    are mutually comparable; they are only compared within a run)."""
    out: list[tuple[int, int, Any]] = []
    i, n = 0, len(found)
    while i < n:
        j = i + 1
        head = found[i][:2]
        while j < n and found[j][:2] == head:
            j += 1
        run = found[i:j]
        if len(run) > 1:
            run.sort(key=lambda e: e[2])
        out.extend(run)
        i = j
    return out
