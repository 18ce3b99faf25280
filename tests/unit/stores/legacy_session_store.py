"""The session store as it was before the per-key layout (kept verbatim for the old-vs-new tests).

Layout: an ordered map ``(key, end, start) -> agg`` plus an ordered ``(end, key, start)`` index
(``sortedcontainers``). ``test_session_store_layout.py`` runs it side by side with
:class:`streamproc.stores.SessionStore` on random operation sequences. Not used by the package.
"""

from __future__ import annotations

from typing import Any

from sortedcontainers import SortedDict, SortedList

from streamproc.records import KeyValue, Windowed
from streamproc.stores._checks import (
    check_duration,
    check_int,
    check_name,
    fail_key,
    key_type_error,
    keys_not_comparable,
)
from streamproc.stores.base import StoreBase, log
from streamproc.stores.iterators import StoreIterator
from streamproc.time import Duration

__all__ = ["LegacySessionStore"]


class LegacySessionStore(StoreBase):
    """An in-memory session store indexed by end time."""

    __slots__ = ("_ends", "_max_length", "_sessions", "retention")
    kind = "session"

    def __init__(self, name: str, retention: Duration) -> None:
        name = check_name(name, "session")
        self.retention = check_duration(retention, "retention", f"session store {name!r}")
        super().__init__(name)
        self._sessions: SortedDict = SortedDict()
        self._ends: SortedList = SortedList()
        self._max_length = 0

    # -- validation -------------------------------------------------------------------------
    def _unpack(self, session: Any, arg: str = "session") -> tuple[Any, int, int]:
        if not isinstance(session, Windowed):
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

    # -- writes -----------------------------------------------------------------------------
    def put(self, session: Windowed, agg: Any) -> bool:
        """Store ``agg`` for ``session``; ``None`` removes it. False when the session was expired."""
        key, start, end = self._unpack(session)
        return self._write(key, start, end, agg, True)

    def remove(self, session: Windowed) -> bool:
        """Remove ``session`` (a no-op when absent). False when the session was expired."""
        key, start, end = self._unpack(session)
        return self._write(key, start, end, None, False)

    def _write(self, key: Any, start: int, end: int, agg: Any, count_drop: bool) -> bool:
        obs = self._observed
        # put advances the observed time; remove (count_drop False) leaves it alone, as Kafka's does
        new_obs = end if (count_drop and end > obs) else obs
        if end < new_obs - self.retention:
            if count_drop:
                self._dropped += 1
            return False
        sessions = self._sessions
        skey = (key, end, start)
        try:
            if agg is None:
                if sessions.pop(skey, _MISSING) is not _MISSING:
                    self._ends.remove((end, key, start))
            elif skey in sessions:
                _dict_set(sessions, skey, agg)  # existing key: the order index is unchanged
            else:
                sessions[skey] = agg
                try:
                    self._ends.add((end, key, start))
                except TypeError:
                    del sessions[skey]
                    raise
                if end - start > self._max_length:
                    self._max_length = end - start
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None
        if new_obs != obs:
            self._observed = new_obs
            self._expire()
        return True

    def _expire(self) -> None:
        """Remove every session with ``end < observed - retention``."""
        cutoff = self._observed - self.retention
        ends = self._ends
        sessions = self._sessions
        while ends:
            end, key, start = ends[0]
            if end >= cutoff:
                break
            del ends[0]
            del sessions[(key, end, start)]

    # -- reads ------------------------------------------------------------------------------
    def find_sessions(self, key: Any, earliest_session_end: int, latest_session_start: int,
                      backward: bool = False) -> StoreIterator[KeyValue]:
        """Sessions of ``key`` with ``end >= earliest_session_end and start <= latest_session_start``,
        ordered by end then start."""
        if key is None:
            fail_key(self._owner())
        owner = self._owner()
        if type(earliest_session_end) is not int:
            earliest_session_end = check_int(owner, "earliest_session_end", earliest_session_end)
        if type(latest_session_start) is not int:
            latest_session_start = check_int(owner, "latest_session_start", latest_session_start)
        sessions = self._sessions
        stop_end = latest_session_start + self._max_length
        out: list[KeyValue] = []
        try:
            for skey in sessions.irange((key, earliest_session_end)):
                k, end, start = skey
                if end > stop_end or k != key:
                    break
                if start <= latest_session_start:
                    out.append(KeyValue(Windowed(k, start, end), sessions[skey]))
        except TypeError as exc:
            raise key_type_error(owner, key, exc) from None
        if backward:
            out.reverse()
        return StoreIterator(out)

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        """The aggregate of session ``[start, end]`` of ``key``, or None."""
        if key is None:
            fail_key(self._owner())
        try:
            return self._sessions.get((key, end, start))
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None

    def fetch(self, key: Any, backward: bool = False) -> StoreIterator[KeyValue]:
        """Every session of ``key``, ordered by end then start."""
        if key is None:
            fail_key(self._owner())
        sessions = self._sessions
        out: list[KeyValue] = []
        try:
            for skey in sessions.irange((key,)):
                k, end, start = skey
                if k != key:
                    break
                out.append(KeyValue(Windowed(k, start, end), sessions[skey]))
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None
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
            sessions = self._sessions
            found: list[tuple[int, Any, int]] = []
            lower = None if key_from is None else (key_from,)
            for k, end, start in sessions.irange(lower):
                if key_to is not None and k > key_to:
                    break
                found.append((end, k, start))
            found.sort()
        except TypeError as exc:
            raise keys_not_comparable(owner, exc) from None
        out = [KeyValue(Windowed(k, start, end), sessions[(k, end, start)]) for end, k, start in found]
        if backward:
            out.reverse()
        return StoreIterator(out)

    def all(self, backward: bool = False) -> StoreIterator[KeyValue]:
        """Every live session, ordered by end, key, start."""
        sessions = self._sessions
        items = self._ends if not backward else reversed(self._ends)
        return StoreIterator([KeyValue(Windowed(k, start, end), sessions[(k, end, start)])
                              for end, k, start in items])

    def __len__(self) -> int:
        return len(self._sessions)

    def _clear(self) -> None:
        self._sessions.clear()
        self._ends.clear()
        self._max_length = 0


_MISSING = object()
_dict_set = dict.__setitem__
