"""In-memory session store (KIP-94), per docs/semantics.md, "Session store".

A session is ``Windowed(key, start, end)`` with ``start <= end`` (both inclusive) and an aggregate.

Rules (``observed`` is the largest session end ever given to ``put``; starts at -1):

- ``put(Windowed(key, start, end), agg)``: ``observed = max(observed, end)``; a session with
  ``end < observed - retention`` (strict) is expired: the put is dropped, counted in
  ``dropped_records`` and returns False. Otherwise the aggregate is stored (replacing) and ``put``
  returns True; ``agg is None`` removes the session.
- ``remove(windowed)``: removes the session if the store holds it; unlike ``put(windowed, None)``
  it leaves ``observed`` as it is (as Kafka Streams' ``remove``) and counts no drop.
- Expired sessions (``end < observed - retention``) are removed whenever ``observed`` advances, so
  they are never returned.
- ``find_sessions(key, earliest_session_end, latest_session_start)``: the live sessions of ``key``
  with ``end >= earliest_session_end and start <= latest_session_start``, ordered by end then
  start. KIP example: sessions [0,99] [101,200] [201,300] [301,400]; ``find_sessions(k, 150, 300)``
  gives [101,200] and [201,300].
- ``fetch_session(key, start, end)``: the aggregate or None.
- ``fetch(key)``: every session of ``key`` by end then start; ``fetch_keys(key_from, key_to)`` and
  ``all()``: sessions of keys in ``[key_from, key_to]`` (None bounds open) ordered by end, then key,
  then start. ``key_from > key_to`` yields nothing (and logs a warning). ``backward=True``
  reverses any of these.
- Reads return snapshot iterators of ``KeyValue(Windowed(key, start, end), agg)``.
- Keys must be hashable and mutually comparable: a key that cannot be ordered against the keys the
  store already holds is rejected with ``TypeError`` before anything changes.

Layout (chosen for the per-record path of session aggregation: find, merge, replace):

- ``_by_key``: ``key -> [entry, ...]``, the sessions of one key sorted by ``(end, start)``; an entry
  is a list ``[end, start, agg, key]``. A key usually has one or two live sessions, so finding and
  replacing them is a dict lookup plus a scan of a short list (bisect when it is long).
- ``_expiry_q`` and ``_expiry``: items ``(end, seq, entry)`` for expiry. An item whose end is no
  smaller than the last one queued is appended to the deque ``_expiry_q`` (sorted by construction:
  with mostly increasing event times, nearly every item), any other goes to the heap ``_expiry``;
  expiring takes the items below the cutoff from the front of both, so most items cost an append
  and a popleft instead of heap sifts. It is lazy: removing a session only marks its entry (``agg``
  slot set to None; stored aggregates are never None), and a session extended in place by
  :meth:`replace_sessions` keeps its old item; when an item surfaces below the cutoff, a removed entry is
  skipped, an entry whose end moved on is queued again with its current end, and only a really
  expired one is deleted. The next expiry therefore costs two comparisons on every advance of
  ``observed``.
- Multi-key reads (``fetch_keys``, ``all``) collect the matching entries and sort them by
  ``(end, key, start)``: O(n log n) in the number of live sessions, like a scan (they are not on the
  per-record path). ``find_sessions``, ``fetch`` and ``fetch_session`` touch one key only.

Session aggregation (:mod:`streamproc.processors.session_aggregate`) uses three public
operations that work on **session entries** instead of result objects. An entry is the store's own
list ``[end, start, agg, key]`` (indices :data:`END`, :data:`START`, :data:`AGG`, :data:`KEY`):
callers read it and never modify it; its ``agg`` slot is None once the session left the store
(removed, merged away or expired), and its window slots change when the session is extended in
place by :meth:`~SessionStore.replace_sessions`.

- :meth:`~SessionStore.find_mergeable` ``(key, timestamp, gap)``: the entries of the sessions a record
  at ``timestamp`` merges with (what ``find_sessions(key, timestamp - gap, timestamp + gap)``
  returns, without building result objects);
- :meth:`~SessionStore.replace_sessions` ``(key, removed, start, end, agg)``: remove those entries
  and put the merged session, with exactly the effects of the equivalent ``remove``/``put`` calls;
  returns the entry holding the new session;
- :meth:`~SessionStore.session_entries`: every live entry.

Export and import (snapshots, changelog restore): :meth:`~SessionStore.export_records` gives the
contents as ``(Windowed(key, start, end), agg)`` pairs, the arguments of ``put``, ordered by end,
key, start; :meth:`~SessionStore.import_records` puts such pairs through the ``put`` rules.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Sequence
from heapq import heappop, heappush
from typing import Any

from ..records import KeyValue, Windowed
from ..time import Duration
from ._checks import check_duration, check_int, check_name, fail_key, key_type_error, keys_not_comparable
from .base import StoreBase, log
from .iterators import StoreIterator, new_key_value, new_windowed

__all__ = ["AGG", "END", "KEY", "START", "SessionStore"]

#: Slots of a session entry ``[end, start, agg, key]``; ``agg`` is None once the entry left the store.
END, START, AGG, KEY = 0, 1, 2, 3


class SessionStore(StoreBase):
    """An in-memory session store: sessions per key, plus a lazy end-time heap for expiry."""

    __slots__ = ("_by_key", "_count", "_expiry", "_expiry_q", "_max_length", "_seq", "last_write_created",
                 "retention")
    kind = "session"

    def __init__(self, name: str, retention: Duration) -> None:
        name = check_name(name, "session")
        self.retention = check_duration(retention, "retention", f"session store {name!r}")
        super().__init__(name)
        self._by_key: dict[Any, list[list[Any]]] = {}
        self._expiry: list[tuple[int, int, list[Any]]] = []
        self._expiry_q: deque[tuple[int, int, list[Any]]] = deque()
        self._count = 0
        self._max_length = 0
        self._seq = 0
        #: Whether the last write that stored a session (``put``, ``replace_sessions``) created a
        #: window the store did not hold (True) or overwrote the aggregate of one it held (False).
        #: Read-only for callers: the change-logging wrapper's write cache reads it.
        self.last_write_created = False

    # -- validation -------------------------------------------------------------------------
    def unpack_session(self, session: Any, arg: str = "session") -> tuple[Any, int, int]:
        """``(key, start, end)`` of a session window, checked as ``put`` and ``remove`` check it:
        TypeError unless ``session`` is a ``Windowed`` with int bounds and a non-None key,
        ValueError when ``start > end`` (messages name the store and ``arg``). Changes nothing."""
        if type(session) is not Windowed and not isinstance(session, Windowed):
            raise TypeError(f"{self._owner()}: {arg} must be a Windowed(key, start, end), "
                            f"got {type(session).__name__} {session!r}")
        key, start, end = session
        if key is None:
            fail_key(self._owner(), f"{arg}.key")
        if type(start) is not int:
            start = check_int(self._owner(), f"{arg}.start", start)
        if type(end) is not int:
            end = check_int(self._owner(), f"{arg}.end", end)
        if start > end:
            raise ValueError(f"{self._owner()}: {arg} must have start <= end, got start={start}, end={end}")
        return key, start, end

    def _sessions_of(self, key: Any) -> list[list[Any]] | None:
        """The entry list of ``key`` (None if it has no session); unhashable keys -> TypeError."""
        try:
            return self._by_key.get(key)
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None

    # -- writes -----------------------------------------------------------------------------
    def put(self, session: Windowed, agg: Any) -> bool:
        """Store ``agg`` for ``session``; ``None`` removes it. False when the session was expired."""
        key, start, end = self.unpack_session(session)
        if agg is None:
            return self._delete(key, start, end, True)
        return self._store(key, start, end, agg) is not None

    def remove(self, session: Windowed) -> bool:
        """Remove ``session`` (a no-op when absent). False when the session was expired."""
        key, start, end = self.unpack_session(session)
        return self._delete(key, start, end, False)

    def _delete(self, key: Any, start: int, end: int, is_put: bool) -> bool:
        """Remove session ``[start, end]`` of ``key`` (if present); False when it was expired.

        ``is_put``: a ``put(session, None)``, which advances ``observed`` and counts an expired
        session as a dropped record; else a ``remove``, which does neither."""
        obs = self._observed
        new_obs = end if (is_put and end > obs) else obs
        if end < new_obs - self.retention:
            if is_put:
                self._dropped += 1
            return False
        lst = self._sessions_of(key)
        if lst:
            i = _index(lst, end, start)
            if i >= 0:
                self._unlink(lst, i)
        if new_obs != obs:
            self._advance(new_obs)
        return True

    def _store(self, key: Any, start: int, end: int, agg: Any) -> list[Any] | None:
        """Store ``agg`` (not None) for session ``[start, end]`` of ``key``; return the entry holding
        it, or None when the session was expired (the drop is counted)."""
        obs = self._observed
        new_obs = end if end > obs else obs
        if end < new_obs - self.retention:
            self._dropped += 1
            return None
        try:
            lst = self._by_key.get(key)
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None
        if lst is None:
            self._check_new_key(key)
            entry = self._new_entry(key, start, end, agg)
            self._by_key[key] = [entry]
        else:
            entry = lst[-1]
            last_end = entry[END]
            if end > last_end or (end == last_end and start > entry[START]):
                entry = self._new_entry(key, start, end, agg)  # after every session of the key
                lst.append(entry)
            elif end == last_end and start == entry[START]:
                entry[AGG] = agg
                self.last_write_created = False
            else:
                i = bisect_left(lst, [end, start])
                entry = lst[i]
                if entry[END] == end and entry[START] == start:
                    entry[AGG] = agg
                    self.last_write_created = False
                else:
                    entry = self._new_entry(key, start, end, agg)
                    lst.insert(i, entry)
        if new_obs != obs:
            self._advance(new_obs)
        return entry

    def _advance(self, new_observed: int) -> None:
        """Set the observed time and expire what fell out of retention."""
        self._observed = new_observed
        cutoff = new_observed - self.retention
        queue = self._expiry_q
        heap = self._expiry
        if (queue and queue[0][0] < cutoff) or (heap and heap[0][0] < cutoff):
            self._expire(cutoff)

    def _queue_expiry(self, end: int, entry: list[Any]) -> None:
        """Queue ``entry`` for expiry at ``end``: on the deque when no earlier than its last item,
        else on the heap."""
        self._seq = seq = self._seq + 1
        queue = self._expiry_q
        if not queue or queue[-1][0] <= end:
            queue.append((end, seq, entry))
        else:
            heappush(self._expiry, (end, seq, entry))

    def _new_entry(self, key: Any, start: int, end: int, agg: Any) -> list[Any]:
        entry = [end, start, agg, key]
        self.last_write_created = True
        self._queue_expiry(end, entry)
        self._count += 1
        if end - start > self._max_length:
            self._max_length = end - start
        return entry

    def _unlink(self, lst: list[list[Any]], i: int) -> None:
        """Remove ``lst[i]`` from the store (its heap item is dropped lazily)."""
        entry = lst.pop(i)
        entry[AGG] = None
        self._count -= 1
        if not lst:
            del self._by_key[entry[KEY]]

    def _expire(self, cutoff: int) -> None:
        """Remove every session with ``end < cutoff`` (``cutoff = observed - retention``)."""
        heap = self._expiry
        queue = self._expiry_q
        by_key = self._by_key
        while True:  # every item below the cutoff is taken; the order does not matter
            if queue and queue[0][0] < cutoff:
                entry = queue.popleft()[2]
            elif heap and heap[0][0] < cutoff:
                entry = heappop(heap)[2]
            else:
                break
            if entry[AGG] is None:
                continue                      # removed earlier
            end = entry[END]
            if end >= cutoff:                 # extended in place since it was queued: queue it
                self._queue_expiry(end, entry)  # again (it stays behind every item taken here)
                continue
            lst = by_key[entry[KEY]]
            del lst[0 if lst[0] is entry else _identity_index(lst, entry)]
            entry[AGG] = None
            self._count -= 1
            if not lst:
                del by_key[entry[KEY]]

    # -- session aggregation: entries instead of result objects ---------------------------------
    def find_mergeable(self, key: Any, timestamp: int, gap: int) -> list[list[Any]]:
        """The entries of the sessions a record of ``key`` at ``timestamp`` merges with, for an
        inactivity gap ``gap``: those with ``end >= timestamp - gap and start <= timestamp + gap``,
        ordered by end then start (what ``find_sessions(key, timestamp - gap, timestamp + gap)``
        returns, with the same checks, as session entries; see the module docstring).

        The caller must not modify them; they stay valid for :meth:`replace_sessions` until the next
        write to the store.
        """
        return self._find(key, timestamp - gap, timestamp + gap)

    def _find(self, key: Any, earliest_session_end: int, latest_session_start: int) -> list[list[Any]]:
        """The entries ``find_sessions`` returns (same checks, same order), as the store's own lists."""
        if key is None:
            fail_key(self._owner())
        if type(earliest_session_end) is not int:
            earliest_session_end = check_int(self._owner(), "earliest_session_end", earliest_session_end)
        if type(latest_session_start) is not int:
            latest_session_start = check_int(self._owner(), "latest_session_start", latest_session_start)
        try:
            lst = self._by_key.get(key)
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None
        if not lst:
            self._check_comparable(key)
            return []
        if len(lst) == 1:
            e = lst[0]
            if e[END] >= earliest_session_end and e[START] <= latest_session_start:
                return [e]
            return []
        i = 0 if lst[0][END] >= earliest_session_end else bisect_left(lst, [earliest_session_end])
        stop_end = latest_session_start + self._max_length
        out = []
        for e in lst[i:] if i else lst:
            if e[END] > stop_end:
                break
            if e[START] <= latest_session_start:
                out.append(e)
        return out

    def replace_sessions(self, key: Any, removed: Sequence[list[Any]], start: int, end: int,
                         agg: Any) -> list[Any] | None:
        """``remove`` every entry of ``removed`` (entries of ``key`` just returned by
        :meth:`find_mergeable`, with no write in between), then ``put(Windowed(key, start, end),
        agg)``; return the entry now holding the new session, or None when the put was dropped as
        expired.

        ``agg`` must not be None; ``start``/``end`` are ints (not checked again). The effects
        (contents, observed time, drops, expiry, :attr:`last_write_created`) are those of the
        sequence of calls; a single removed session that the new one contains is updated in place
        (the returned entry is then that removed entry, with its new window).
        """
        obs = self._observed
        new_obs = end if end > obs else obs
        retention = self.retention
        if len(removed) == 1 and end < new_obs - retention:
            pass  # the put will be dropped: take the general path below
        elif len(removed) == 1:
            old = removed[0]
            if old[START] == start and old[END] == end:
                old[AGG] = agg                # remove + put of the same window = overwrite
                self.last_write_created = False
                return old
            if start <= old[START] and end >= old[END]:
                lst = self._by_key[key]
                last = len(lst) - 1
                i = last if lst[last] is old else _identity_index(lst, old)
                if ((i == last or (end, start) < (lst[i + 1][END], lst[i + 1][START]))
                        and (i == 0 or (end, start) > (lst[i - 1][END], lst[i - 1][START]))):
                    old[END] = end            # extend in place: the heap item is re-keyed lazily
                    old[START] = start
                    old[AGG] = agg
                    self.last_write_created = True      # a new window (the old one is removed)
                    if end - start > self._max_length:
                        self._max_length = end - start
                    if new_obs != obs:
                        self._advance(new_obs)
                    return old
        if removed:
            lst = self._by_key[key]
            for old in removed:
                if old[AGG] is not None:
                    self._unlink(lst, _identity_index(lst, old))
        return self._store(key, start, end, agg)

    def session_entries(self) -> list[list[Any]]:
        """Every live session entry ``[end, start, agg, key]`` (no order; read-only for the caller)."""
        return [e for lst in self._by_key.values() for e in lst]

    # -- export and import ------------------------------------------------------------------
    def export_records(self) -> list[tuple[Windowed, Any]]:
        """The contents as ``(Windowed(key, start, end), agg)`` pairs - the arguments of ``put`` -
        ordered by end, then key, then start (as :meth:`all`). :meth:`import_records` of them into an
        empty store with the same retention rebuilds the same contents, and the observed stream time
        when the newest session is still held (it is then the largest end)."""
        try:
            rows = [(e[END], e[KEY], e[START], e[AGG]) for lst in self._by_key.values() for e in lst]
            rows.sort(key=_row_order)
        except TypeError as exc:
            raise keys_not_comparable(self._owner(), exc) from None
        return [(new_windowed((k, start, end)), agg) for end, k, start, agg in rows]

    def import_records(self, records: Iterable[tuple[Windowed, Any]]) -> int:
        """``put(session, agg)`` for each pair of ``records`` in order (the ``put`` rules apply: an
        expired session is dropped, ``agg`` None removes); returns the number of pairs."""
        put = self.put
        count = 0
        for session, agg in records:
            put(session, agg)
            count += 1
        return count

    # -- reads ------------------------------------------------------------------------------
    def find_sessions(self, key: Any, earliest_session_end: int, latest_session_start: int,
                      backward: bool = False) -> StoreIterator[KeyValue]:
        """Sessions of ``key`` with ``end >= earliest_session_end and start <= latest_session_start``,
        ordered by end then start."""
        found = self._find(key, earliest_session_end, latest_session_start)
        out = [new_key_value((new_windowed((e[KEY], e[START], e[END])), e[AGG])) for e in found]
        if backward:
            out.reverse()
        return StoreIterator(out)

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        """The aggregate of session ``[start, end]`` of ``key``, or None."""
        if key is None:
            fail_key(self._owner())
        if type(start) is not int:
            start = check_int(self._owner(), "start", start)
        if type(end) is not int:
            end = check_int(self._owner(), "end", end)
        try:
            lst = self._by_key.get(key)
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None
        if not lst:
            return None
        i = _index(lst, end, start)
        return lst[i][AGG] if i >= 0 else None

    def fetch(self, key: Any, backward: bool = False) -> StoreIterator[KeyValue]:
        """Every session of ``key``, ordered by end then start."""
        if key is None:
            fail_key(self._owner())
        lst = self._sessions_of(key)
        if not lst:
            self._check_comparable(key)
            return StoreIterator([])
        out = [new_key_value((new_windowed((e[KEY], e[START], e[END])), e[AGG])) for e in lst]
        if backward:
            out.reverse()
        return StoreIterator(out)

    def fetch_keys(self, key_from: Any = None, key_to: Any = None,
                   backward: bool = False) -> StoreIterator[KeyValue]:
        """Sessions of keys in ``[key_from, key_to]`` (None bounds open), by end, key, start."""
        owner = self._owner()
        try:
            if key_from is not None and key_to is not None and key_from > key_to:
                log.warning("%s: fetch_keys with key_from %r > key_to %r returns nothing",
                            owner, key_from, key_to)
                return StoreIterator([])
            rows = [(e[END], e[KEY], e[START], e[AGG])
                    for k, lst in self._by_key.items()
                    if (key_from is None or k >= key_from) and (key_to is None or k <= key_to)
                    for e in lst]
            rows.sort(key=_row_order)
        except TypeError as exc:
            raise keys_not_comparable(owner, exc) from None
        out = [new_key_value((new_windowed((k, start, end)), agg)) for end, k, start, agg in rows]
        if backward:
            out.reverse()
        return StoreIterator(out)

    def all(self, backward: bool = False) -> StoreIterator[KeyValue]:
        """Every live session, ordered by end, key, start."""
        return self.fetch_keys(None, None, backward)

    def __len__(self) -> int:
        return self._count

    def _clear(self) -> None:
        self._by_key.clear()
        self._expiry.clear()
        self._expiry_q.clear()
        self._count = 0
        self._max_length = 0


def _row_order(row: tuple[int, Any, int, Any]) -> tuple[int, Any, int]:
    return row[0], row[1], row[2]


def _index(lst: list[list[Any]], end: int, start: int) -> int:
    """Position of the entry ``(end, start)`` in a key's sorted list, or -1."""
    i = bisect_left(lst, [end, start])
    if i < len(lst):
        e = lst[i]
        if e[END] == end and e[START] == start:
            return i
    return -1


def _identity_index(lst: list[list[Any]], entry: list[Any]) -> int:
    for i, e in enumerate(lst):
        if e is entry:
            return i
    raise ValueError("session entry is not in the store (was the store written to since find_mergeable?)")
