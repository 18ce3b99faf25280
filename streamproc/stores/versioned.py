"""In-memory versioned key-value store (KIP-889), per docs/semantics.md, "Versioned store".

Each key has versions ``valid_from -> value | tombstone``; a version's ``valid_to`` is the next
larger version timestamp of that key (tombstones included) and undefined for the newest.
``observed`` is the largest version timestamp ever put (starts at -1); ``H`` is the history
retention.

Layout:

- a **latest-value map** ``key -> VersionedRecord(value, timestamp, None)`` holding each key's
  newest version (``value`` None for a tombstone); ``get(key)`` returns that record itself (records
  are immutable), so reading the newest version allocates nothing;
- each key's **older versions** as parallel arrays of ``valid_from`` and values, ascending; as
  versions of a key are contiguous, a version's ``valid_to`` is the next entry's ``valid_from``
  (the newest older version ends at the latest version's timestamp), so ``get(key, as_of)`` is one
  dict lookup plus a bisect;
- **segments of older versions indexed by valid_to**: segment ``valid_to // segment_interval`` lists
  the keys having an older version that ends in it (and keys whose newest version is a tombstone).
  When a whole segment falls out of history retention (``(segment + 1) * segment_interval <=
  observed - H``), every version ending in it is dropped at once, as are keys left with nothing but
  an expired tombstone. Expiry is never visible through ``get``: a dropped version's ``valid_to``
  is ``<= observed - H``, so no query within history retention can select it.

Rules:

- ``put(key, value, timestamp) -> int``: if ``timestamp < observed - H`` nothing is stored, the
  put counts in ``dropped_records`` and the result is :data:`NOT_PUT` (``-2**63``). Otherwise the
  version is stored (the same timestamp replaces), ``observed`` advances, and the result is the
  new version's ``valid_to``, or :data:`VALID_TO_UNDEFINED` (-1) when it is the newest.
  ``value=None`` stores a tombstone; **[deliberate]** a tombstone is always recorded as a version.
- ``get(key)``: ``VersionedRecord(value, timestamp, None)`` of the newest version, or None if
  there is none or it is a tombstone.
- ``get(key, as_of)``: if ``as_of < observed - H``: the newest version if its timestamp
  ``<= as_of``, else None. Otherwise the version with the largest ``valid_from <= as_of``; None if
  it is a tombstone or absent; ``valid_to`` is None for the newest version.
- ``delete(key, timestamp)``: if ``timestamp < observed - H``: None, no change (counted as a
  drop). Else returns ``get(key, timestamp)`` and then puts a tombstone at ``timestamp``.

Export and import (snapshots, changelog restore): ``export_records()`` gives every stored version,
tombstones included, as ``(key, value, timestamp)`` - the arguments of ``put`` - ordered by
timestamp (ties in the order of ``keys()``), so no version is older than history retention when it
is put again; ``import_records(triples)`` puts them (into an empty store with the same parameters:
the same versions and observed stream time).

Default ``segment_interval`` (H in ms): H <= 60 s: max(H/3, 2 s); H <= 5 min: max(H/5, 20 s);
H <= 1 h: max(H/12, 60 s); else max(H/24, 5 min) (integer division).

Vector (H = 100): ``put(k,a,10) -> -1; put(k,b,20) -> -1; put(k,c,15) -> 20``; ``get(k) =
(b,20,None)``, ``get(k,9) = None``, ``get(k,14) = (a,10,15)``, ``get(k,17) = (c,15,20)``,
``get(k,25) = (b,20,None)``; ``put(k,None,30) -> -1``; ``get(k) = None``, ``get(k,25) =
(b,20,30)``, ``get(k,35) = None``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from functools import partial
from typing import Any, NamedTuple

from sortedcontainers import SortedDict

from ..time import Duration
from ._checks import check_duration, check_int, check_name, fail_key, key_type_error
from .base import StoreBase

__all__ = [
    "NOT_PUT",
    "VALID_TO_UNDEFINED",
    "VersionedKeyValueStore",
    "VersionedRecord",
    "default_segment_interval",
]

#: ``put`` result when the version was older than history retention and was not stored.
NOT_PUT = -(2**63)
#: ``put`` result when the new version is the newest of its key (its ``valid_to`` is undefined).
VALID_TO_UNDEFINED = -1


class VersionedRecord(NamedTuple):
    """A version: ``value``, its ``timestamp`` (valid_from) and ``valid_to`` (None for the newest)."""

    value: Any
    timestamp: int
    valid_to: int | None = None


#: ``_record((value, timestamp, valid_to))``: a VersionedRecord without the NamedTuple ``__new__`` wrapper.
_record = partial(tuple.__new__, VersionedRecord)


def default_segment_interval(history_retention: int) -> int:
    """The default segment interval for a history retention (both ms)."""
    h = history_retention
    if h <= 60_000:
        return max(h // 3, 2_000)
    if h <= 300_000:
        return max(h // 5, 20_000)
    if h <= 3_600_000:
        return max(h // 12, 60_000)
    return max(h // 24, 300_000)


class VersionedKeyValueStore(StoreBase):
    """An in-memory versioned key-value store."""

    __slots__ = (
        "_history",
        "_latest",
        "_num_history",
        "_segments",
        "history_retention",
        "segment_interval",
    )
    kind = "versioned"

    def __init__(self, name: str, history_retention: Duration, segment_interval: Duration | None = None) -> None:
        name = check_name(name, "versioned")
        owner = f"versioned store {name!r}"
        self.history_retention = check_duration(history_retention, "history_retention", owner)
        if segment_interval is None:
            self.segment_interval = default_segment_interval(self.history_retention)
        else:
            self.segment_interval = check_duration(segment_interval, "segment_interval", owner,
                                                   allow_zero=False)
        super().__init__(name)
        self._latest: dict[Any, VersionedRecord] = {}
        self._history: dict[Any, tuple[list[int], list[Any]]] = {}
        self._segments: SortedDict = SortedDict()
        self._num_history = 0

    # -- writes -----------------------------------------------------------------------------
    def put(self, key: Any, value: Any, timestamp: int) -> int:
        """Add a version of ``key`` valid from ``timestamp`` (``value`` None = tombstone).

        Returns the new version's ``valid_to``, :data:`VALID_TO_UNDEFINED` when it is the newest, or
        :data:`NOT_PUT` when ``timestamp`` is older than history retention.
        """
        if key is None:
            fail_key(self._owner())
        if type(timestamp) is not int:
            timestamp = check_int(self._owner(), "timestamp", timestamp)
        obs = self._observed
        if timestamp < obs - self.history_retention:
            self._dropped += 1
            return NOT_PUT
        latest_map = self._latest
        try:
            latest = latest_map.get(key)
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None
        interval = self.segment_interval
        result = VALID_TO_UNDEFINED
        if latest is None:
            self._check_new_key(key)
            latest_map[key] = _record((value, timestamp, None))
            if value is None:
                self._index(timestamp // interval, key)
        else:
            latest_ts = latest[1]
            if timestamp >= latest_ts:
                if timestamp > latest_ts:
                    hist = self._history.get(key)
                    if hist is None:
                        self._history[key] = ([latest_ts], [latest[0]])
                    else:
                        hist[0].append(latest_ts)
                        hist[1].append(latest[0])
                    self._num_history += 1
                    self._index(timestamp // interval, key)  # the old latest now ends at `timestamp`
                latest_map[key] = _record((value, timestamp, None))
                if value is None:
                    self._index(timestamp // interval, key)
            else:
                result = self._put_old(key, value, timestamp, latest_ts)
        if timestamp > obs:
            self._observed = timestamp
            self._expire()
        return result

    def _put_old(self, key: Any, value: Any, timestamp: int, latest_ts: int) -> int:
        """Insert or replace an older version (``timestamp < latest_ts``); return its valid_to."""
        hist = self._history.get(key)
        if hist is None:
            hist = self._history[key] = ([], [])
        stamps, values = hist
        i = bisect_left(stamps, timestamp)
        n = len(stamps)
        if i < n and stamps[i] == timestamp:
            values[i] = value
            return stamps[i + 1] if i + 1 < n else latest_ts
        stamps.insert(i, timestamp)
        values.insert(i, value)
        self._num_history += 1
        valid_to = stamps[i + 1] if i + 1 <= n else latest_ts
        interval = self.segment_interval
        self._index(valid_to // interval, key)
        if i > 0:  # the previous version now ends at `timestamp`
            self._index(timestamp // interval, key)
        return valid_to

    def _index(self, segment: int, key: Any) -> None:
        segs = self._segments
        keys = segs.get(segment)
        if keys is None:
            segs[segment] = {key}
        else:
            keys.add(key)

    def _expire(self) -> None:
        """Drop every segment with ``(segment + 1) * segment_interval <= observed - H``."""
        segs = self._segments
        if not segs:
            return
        interval = self.segment_interval
        bound = self._observed - self.history_retention  # valid_to <= bound is out of retention
        last_expired = bound // interval - 1  # the largest s with (s + 1) * interval <= bound
        first = segs.peekitem(0)[0]
        if first > last_expired:
            return
        cut = (last_expired + 1) * interval  # versions with valid_to < cut are dropped
        touched: set[Any] = set()
        while segs:
            seg_id, keys = segs.peekitem(0)
            if seg_id > last_expired:
                break
            segs.popitem(0)
            touched |= keys
        latest_map = self._latest
        history = self._history
        for key in touched:
            latest = latest_map.get(key)
            if latest is None:
                continue
            hist = history.get(key)
            if hist is not None:
                stamps, values = hist
                # valid_to of stamps[j] is stamps[j + 1], and the latest timestamp for the last one
                drop = len(stamps) if latest[1] < cut else bisect_left(stamps, cut, 1) - 1
                if drop > 0:
                    del stamps[:drop]
                    del values[:drop]
                    self._num_history -= drop
                    if not stamps:
                        del history[key]
            if latest[0] is None and latest[1] < cut and key not in history:
                del latest_map[key]

    # -- reads ------------------------------------------------------------------------------
    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        """The newest version (``as_of`` None) or the version valid at ``as_of``; None for a tombstone."""
        if key is None:
            fail_key(self._owner())
        if as_of is not None and type(as_of) is not int:
            as_of = check_int(self._owner(), "as_of", as_of)
        try:
            latest = self._latest.get(key)
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None
        if latest is None:
            return None
        latest_ts = latest[1]
        if as_of is None or latest_ts <= as_of:
            return None if latest[0] is None else latest
        if as_of < self._observed - self.history_retention:
            return None
        hist = self._history.get(key)
        if hist is None:
            return None
        stamps, values = hist
        i = bisect_right(stamps, as_of) - 1
        if i < 0:
            return None
        value = values[i]
        if value is None:
            return None
        return _record((value, stamps[i], stamps[i + 1] if i + 1 < len(stamps) else latest_ts))

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        """Put a tombstone at ``timestamp`` and return what ``get(key, timestamp)`` gave before it.

        Outside history retention (``timestamp < observed - H``) nothing changes and the result is None.
        """
        if key is None:
            fail_key(self._owner())
        if type(timestamp) is not int:
            timestamp = check_int(self._owner(), "timestamp", timestamp)
        if timestamp < self._observed - self.history_retention:
            self._dropped += 1
            return None
        old = self.get(key, timestamp)
        self.put(key, None, timestamp)
        return old

    # -- inspection -------------------------------------------------------------------------
    def versions(self, key: Any) -> list[VersionedRecord]:
        """Every stored version of ``key``, oldest first, tombstones included (value None).

        Versions that fell out of history retention may still be listed until their segment
        is dropped.
        """
        if key is None:
            fail_key(self._owner())
        latest = self._latest.get(key)
        if latest is None:
            return []
        out: list[VersionedRecord] = []
        hist = self._history.get(key)
        if hist is not None:
            stamps, values = hist
            n = len(stamps)
            for i in range(n):
                out.append(VersionedRecord(values[i], stamps[i], stamps[i + 1] if i + 1 < n else latest[1]))
        out.append(latest)
        return out

    # -- export and import ------------------------------------------------------------------
    def export_records(self) -> list[tuple[Any, Any, int]]:
        """Every stored version (tombstones included: value None) as ``(key, value, timestamp)``
        (the arguments of :meth:`put`), ordered by timestamp, ties in the order of :meth:`keys`.

        Versions that fell out of history retention but whose segment was not dropped yet are
        included (as in :meth:`versions`)."""
        rows: list[tuple[int, int, Any, Any]] = []
        append = rows.append
        history = self._history
        for i, (key, latest) in enumerate(self._latest.items()):
            hist = history.get(key)
            if hist is not None:
                for ts, value in zip(hist[0], hist[1], strict=True):
                    append((ts, i, key, value))
            append((latest[1], i, key, latest[0]))
        rows.sort(key=_row_order)
        return [(key, value, ts) for ts, _, key, value in rows]

    def import_records(self, records: Iterable[tuple[Any, Any, int]]) -> int:
        """``put(key, value, timestamp)`` for each triple of ``records`` in order (the ``put`` rules
        apply: a version older than history retention is dropped); returns the number of triples."""
        put = self.put
        count = 0
        for key, value, timestamp in records:
            put(key, value, timestamp)
            count += 1
        return count

    def keys(self) -> list[Any]:
        """Every key with a stored version (including keys whose newest version is a tombstone)."""
        return list(self._latest)

    def __len__(self) -> int:
        """Number of stored versions (newest and older, tombstones included)."""
        return len(self._latest) + self._num_history

    def _clear(self) -> None:
        self._latest.clear()
        self._history.clear()
        self._segments.clear()
        self._num_history = 0


def _row_order(row: tuple[int, int, Any, Any]) -> tuple[int, int]:
    return row[0], row[1]
