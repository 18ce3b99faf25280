"""In-memory window store (KIP-428), per docs/semantics.md, "Window store".

Layout: one segment per window start (1 ms granularity) in an ordered map
``start -> segment``; a segment maps ``key -> value`` (``key -> [values...]`` in insertion order
when ``retain_duplicates``). A segment with few keys is a plain ``dict`` that is sorted on demand
for key-range reads; past :data:`SMALL_SEGMENT` keys it becomes a ``sortedcontainers.SortedDict``
(this keeps a store with many sparse window starts, such as a join buffer, small in memory).

Rules (``observed`` is the largest window start ever given to ``put``; it starts at -1):

- A window start ``s`` is **expired** when ``s <= observed - retention``. Expired segments are
  removed before every put and every read (the set of expired segments only changes when
  ``observed`` advances, so the store removes them right then, inside ``put``). Expired windows are
  never returned.
- ``put(key, value, window_start)``: ``observed = max(observed, window_start)``; then if
  ``window_start <= observed - grace`` the put is **dropped** (late or expired; counted in
  ``dropped_records``) and ``put`` returns False. Otherwise ``value`` is stored (overwriting, or
  appended when ``retain_duplicates``) and ``put`` returns True; ``value is None`` deletes the key
  from that window (a no-op when ``retain_duplicates``).
- ``get(key, window_start)``: the value, or None (with duplicates: the value put last).
- ``fetch(key, time_from, time_to, backward=False)``: ``KeyValue(window_start, value)`` for every
  start in ``[max(time_from, observed - retention + 1), time_to]``, start ascending (descending when
  backward; duplicates in insertion order, reversed when backward). ``None`` bounds are open.
- ``fetch_keys(key_from, key_to, time_from, time_to, backward=False)`` and
  ``fetch_all(time_from, time_to, backward=False)``: ``KeyValue(Windowed(key, start, start +
  window_size), value)`` ordered by start, then key (the exact reverse when backward). ``None``
  bounds are open; ``key_from > key_to`` yields nothing and logs a warning.
- ``all(backward=False)``: every live entry, as ``fetch_all(None, None)``.
- Reads return snapshot iterators: later puts, deletes and expiry do not change them.

Export and import (snapshots, changelog restore): ``export_records()`` gives every live value as
``(key, value, window_start)`` - the arguments of ``put`` - ordered by start, then key (duplicates
in insertion order); ``import_records(triples)`` puts them (into an empty store with the same
parameters: the same contents, and the same observed stream time when the newest window still
holds a value).

Factory validation (in this order, each a ``ValueError`` naming the store and values): name
empty; retention < 0; window_size < 0; grace < 0; ``window_size > retention``; ``grace > retention``.
``grace`` defaults to ``retention``.

Costs: put/get O(log S) for S live window starts (O(1) when the start's segment exists); fetch of
one key is O(log S + windows in the time range); multi-key reads add O(log m) per segment.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Any

from sortedcontainers import SortedDict

from ..records import KeyValue
from ..time import Duration
from ._checks import (
    check_duration,
    check_int,
    check_name,
    check_optional_int,
    fail_key,
    key_type_error,
    keys_not_comparable,
)
from .base import StoreBase, log
from .iterators import StoreIterator, new_key_value, new_windowed

__all__ = ["SMALL_SEGMENT", "WindowStore"]

#: A segment holding at most this many keys is a plain dict (sorted on demand for range reads).
SMALL_SEGMENT = 32


class WindowStore(StoreBase):
    """An in-memory window store with 1 ms segments, grace and optional duplicates."""

    __slots__ = ("_count", "_segments", "grace", "retain_duplicates", "retention", "window_size")
    kind = "window"

    def __init__(self, name: str, retention: Duration, window_size: Duration,
                 grace: Duration | None = None, retain_duplicates: bool = False) -> None:
        name = check_name(name, "window")
        owner = f"window store {name!r}"
        retention_ms = check_duration(retention, "retention", owner)
        size_ms = check_duration(window_size, "window_size", owner)
        grace_ms = retention_ms if grace is None else check_duration(grace, "grace", owner)
        if size_ms > retention_ms:
            raise ValueError(
                f"The retention period of the window store {name} must be no smaller than its window size. "
                f"Got size=[{size_ms}], retention=[{retention_ms}]")
        if grace_ms > retention_ms:
            raise ValueError(
                f"The grace period of the window store {name} must not exceed its retention period. "
                f"Got grace period=[{grace_ms}], retention=[{retention_ms}]")
        if not isinstance(retain_duplicates, bool):
            raise TypeError(f"{owner}: retain_duplicates must be a bool, got {retain_duplicates!r}")
        super().__init__(name)
        self.retention = retention_ms
        self.window_size = size_ms
        self.grace = grace_ms
        self.retain_duplicates = retain_duplicates
        self._segments: SortedDict = SortedDict()
        self._count = 0

    # -- writes -----------------------------------------------------------------------------
    def put(self, key: Any, value: Any, window_start: int) -> bool:
        """Store ``value`` for ``key`` in the window starting at ``window_start``.

        Returns True when the put was applied, False when it was dropped as late/expired.
        """
        if key is None:
            fail_key(self._owner())
        if type(window_start) is not int:
            window_start = check_int(self._owner(), "window_start", window_start)
        obs = self._observed
        new_obs = window_start if window_start > obs else obs
        if window_start <= new_obs - self.grace:
            self._dropped += 1
            if new_obs != obs:  # only possible with grace 0
                self._observed = new_obs
                self._expire()
            return False
        segs = self._segments
        seg = segs.get(window_start)
        if value is not None and (seg is None or key not in seg):
            self._check_new_key(key)
        try:
            if self.retain_duplicates:
                if value is not None:
                    if seg is None:
                        segs[window_start] = {key: [value]}
                        self._count += 1
                    else:
                        values = seg.get(key)
                        if values is None:
                            self._add_key(window_start, seg, key, [value])
                        else:
                            values.append(value)
                            self._count += 1
            elif value is None:
                if seg is not None and key in seg:
                    del seg[key]
                    self._count -= 1
                    if not seg:
                        del segs[window_start]
            elif seg is None:
                segs[window_start] = {key: value}
                self._count += 1
            elif key in seg:
                _dict_set(seg, key, value)  # existing key (dict or SortedDict): the key order is unchanged
            else:
                self._add_key(window_start, seg, key, value)
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None
        if new_obs != obs:
            self._observed = new_obs
            self._expire()
        return True

    def _add_key(self, window_start: int, seg: Any, key: Any, item: Any) -> None:
        """Add a key that is not yet in ``seg`` (promoting a full small segment to a SortedDict)."""
        if type(seg) is dict and len(seg) >= SMALL_SEGMENT:
            promoted = SortedDict(seg)
            promoted[key] = item
            self._segments[window_start] = promoted
        else:
            seg[key] = item
        self._count += 1

    def _expire(self) -> None:
        """Remove every segment whose start is ``<= observed - retention``."""
        cutoff = self._observed - self.retention
        segs = self._segments
        dups = self.retain_duplicates
        while segs:
            start, seg = segs.peekitem(0)
            if start > cutoff:
                break
            segs.popitem(0)
            self._count -= sum(map(len, seg.values())) if dups else len(seg)

    # -- point read -------------------------------------------------------------------------
    def get(self, key: Any, window_start: int) -> Any:
        """The value of ``key`` in the window starting at ``window_start``, or None."""
        if key is None:
            fail_key(self._owner())
        if type(window_start) is not int:
            window_start = check_int(self._owner(), "window_start", window_start)
        seg = self._segments.get(window_start)
        if seg is None:
            return None
        try:
            value = seg.get(key)
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None
        if self.retain_duplicates and value is not None:
            return value[-1]
        return value

    # -- range reads ------------------------------------------------------------------------
    def _time_bounds(self, time_from: Any, time_to: Any) -> tuple[int, int | None]:
        owner = self._owner()
        tf = check_optional_int(owner, "time_from", time_from)
        tt = check_optional_int(owner, "time_to", time_to)
        lo = self._observed - self.retention + 1
        if tf is not None and tf > lo:
            lo = tf
        return lo, tt

    def fetch(self, key: Any, time_from: int | None = None, time_to: int | None = None,
              backward: bool = False) -> StoreIterator[KeyValue]:
        """``KeyValue(window_start, value)`` of ``key`` for starts in ``[time_from, time_to]``."""
        if key is None:
            fail_key(self._owner())
        lo, hi = self._time_bounds(time_from, time_to)
        out: list[KeyValue] = []
        if hi is not None and lo > hi:
            return StoreIterator(out)
        segs = self._segments
        append = out.append
        try:
            if self.retain_duplicates:
                for start in segs.irange(lo, hi, reverse=backward):
                    values = segs[start].get(key)
                    if values is not None:
                        for v in (reversed(values) if backward else values):
                            append(new_key_value((start, v)))
            else:
                for start in segs.irange(lo, hi, reverse=backward):
                    v = segs[start].get(key)
                    if v is not None:
                        append(new_key_value((start, v)))
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None
        return StoreIterator(out)

    def fetch_keys(self, key_from: Any = None, key_to: Any = None, time_from: int | None = None,
                   time_to: int | None = None, backward: bool = False) -> StoreIterator[KeyValue]:
        """``KeyValue(Windowed(key, start, start + window_size), value)`` for keys in
        ``[key_from, key_to]`` and starts in ``[time_from, time_to]``, by start then key."""
        if key_from is not None and key_to is not None:
            try:
                inverted = key_from > key_to
            except TypeError as exc:
                raise keys_not_comparable(self._owner(), exc) from None
            if inverted:
                log.warning("%s: fetch_keys with key_from %r > key_to %r returns nothing",
                            self._owner(), key_from, key_to)
                return StoreIterator([])
        lo, hi = self._time_bounds(time_from, time_to)
        out: list[KeyValue] = []
        if hi is not None and lo > hi:
            return StoreIterator(out)
        segs = self._segments
        size = self.window_size
        dups = self.retain_duplicates
        append = out.append
        try:
            for start in segs.irange(lo, hi):
                seg = segs[start]
                end = start + size
                for k in _keys_in_range(seg, key_from, key_to):
                    if dups:
                        w = new_windowed((k, start, end))
                        for v in seg[k]:
                            append(new_key_value((w, v)))
                    else:
                        append(new_key_value((new_windowed((k, start, end)), seg[k])))
        except TypeError as exc:
            raise keys_not_comparable(self._owner(), exc) from None
        if backward:
            out.reverse()
        return StoreIterator(out)

    def fetch_all(self, time_from: int | None = None, time_to: int | None = None,
                  backward: bool = False) -> StoreIterator[KeyValue]:
        """Every key's windows with start in ``[time_from, time_to]``, by start then key."""
        return self.fetch_keys(None, None, time_from, time_to, backward)

    def all(self, backward: bool = False) -> StoreIterator[KeyValue]:
        """Every live entry, by start then key."""
        return self.fetch_keys(None, None, None, None, backward)

    # -- export and import ------------------------------------------------------------------
    def export_records(self) -> list[tuple[Any, Any, int]]:
        """Every live value as ``(key, value, window_start)`` (the arguments of :meth:`put`), ordered
        by start, then key; the duplicates of a key in insertion order (as :meth:`all`)."""
        out: list[tuple[Any, Any, int]] = []
        append = out.append
        segs = self._segments
        dups = self.retain_duplicates
        try:
            for start, seg in segs.items():
                for k in _keys_in_range(seg, None, None):
                    if dups:
                        for v in seg[k]:
                            append((k, v, start))
                    else:
                        append((k, seg[k], start))
        except TypeError as exc:
            raise keys_not_comparable(self._owner(), exc) from None
        return out

    def import_records(self, records: Iterable[tuple[Any, Any, int]]) -> int:
        """``put(key, value, window_start)`` for each triple of ``records`` in order (the ``put``
        rules apply: late or expired windows are dropped); returns the number of triples."""
        put = self.put
        count = 0
        for key, value, window_start in records:
            put(key, value, window_start)
            count += 1
        return count

    def __len__(self) -> int:
        """Number of live values (each duplicate counts)."""
        return self._count

    def _clear(self) -> None:
        self._segments.clear()
        self._count = 0


def _keys_in_range(seg: Any, key_from: Any, key_to: Any) -> list[Any]:
    """The keys of ``seg`` in ``[key_from, key_to]`` (None bounds open), ascending."""
    if type(seg) is dict:
        keys = sorted(seg)
        lo = 0 if key_from is None else bisect_left(keys, key_from)
        hi = len(keys) if key_to is None else bisect_right(keys, key_to)
        return keys[lo:hi] if (lo or hi != len(keys)) else keys
    return list(seg.irange(key_from, key_to))


_dict_set = dict.__setitem__
