"""Brute-force reference models written from docs/semantics.md (not from the implementation).

Each model keeps the simplest possible state (plain dicts/lists, full scans, sorting on every read)
and follows the wording of the rule it cites. They are deliberately slow and obviously correct.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TOMBSTONE = object()
NOT_PUT = -(2**63)
VALID_TO_UNDEFINED = -1


# ---------------------------------------------------------------------------------------------
# §1 window store
# ---------------------------------------------------------------------------------------------
class WindowModel:
    """§1: ``observed`` = largest window start given to put (starts at -1).

    A start ``s`` is expired when ``s <= observed - retention``; a put is dropped when
    ``window_start <= observed - grace`` (after updating observed).
    """

    def __init__(self, retention: int, size: int, grace: int | None = None, dups: bool = False) -> None:
        self.retention = retention
        self.size = size
        self.grace = retention if grace is None else grace
        self.dups = dups
        self.observed = -1
        self.dropped = 0
        # start -> list of (key, value) in insertion order (with dups several per key)
        self.data: dict[int, list[tuple[Any, Any]]] = {}

    def _live(self, start: int) -> bool:
        return not (start <= self.observed - self.retention)

    def put(self, key: Any, value: Any, start: int) -> bool:
        self.observed = max(self.observed, start)
        if start <= self.observed - self.grace:
            self.dropped += 1
            return False
        entries = self.data.setdefault(start, [])
        if self.dups:
            if value is not None:
                entries.append((key, value))
        else:
            entries[:] = [(k, v) for k, v in entries if k != key]
            if value is not None:
                entries.append((key, value))
        return True

    def get(self, key: Any, start: int) -> Any:
        if not self._live(start):
            return None
        for k, v in reversed(self.data.get(start, [])):
            if k == key:
                return v
        return None

    def _items(self) -> list[tuple[int, Any, int, Any]]:
        """Live (start, key, insertion index, value)."""
        out = []
        for start, entries in self.data.items():
            if not self._live(start):
                continue
            for i, (k, v) in enumerate(entries):
                out.append((start, k, i, v))
        return out

    def fetch(self, key: Any, time_from: int, time_to: int, backward: bool = False) -> list[tuple[int, Any]]:
        lo = max(time_from, self.observed - self.retention + 1)
        items = sorted((s, i, v) for s, k, i, v in self._items() if k == key and lo <= s <= time_to)
        out = [(s, v) for s, _, v in items]
        return out[::-1] if backward else out

    def fetch_keys(self, key_from: Any, key_to: Any, time_from: int | None, time_to: int | None,
                   backward: bool = False) -> list[tuple[tuple[Any, int, int], Any]]:
        if key_from is not None and key_to is not None and key_from > key_to:
            return []
        lo = self.observed - self.retention + 1
        if time_from is not None:
            lo = max(lo, time_from)
        items = []
        for s, k, i, v in self._items():
            if s < lo or (time_to is not None and s > time_to):
                continue
            if (key_from is not None and k < key_from) or (key_to is not None and k > key_to):
                continue
            items.append((s, k, i, v))
        items.sort(key=lambda t: (t[0], t[1], t[2]))
        out = [((k, s, s + self.size), v) for s, k, _, v in items]
        return out[::-1] if backward else out


# ---------------------------------------------------------------------------------------------
# §2.1 session store
# ---------------------------------------------------------------------------------------------
class SessionModel:
    """§2.1: ``observed`` = max session end given to put; ``end < observed - retention`` is expired."""

    def __init__(self, retention: int) -> None:
        self.retention = retention
        self.observed = -1
        self.dropped = 0
        self.sessions: dict[tuple[Any, int, int], Any] = {}  # (key, start, end) -> agg

    def put(self, key: Any, start: int, end: int, agg: Any) -> bool:
        self.observed = max(self.observed, end)
        if end < self.observed - self.retention:
            self.dropped += 1
            return False
        if agg is None:
            self.sessions.pop((key, start, end), None)
        else:
            self.sessions[(key, start, end)] = agg
        return True

    def remove(self, key: Any, start: int, end: int) -> None:
        # Kafka's remove only deletes the session: unlike put(session, None) it leaves observed alone.
        self.sessions.pop((key, start, end), None)

    def live(self) -> list[tuple[Any, int, int, Any]]:
        """Live sessions ordered by end, key, start."""
        out = [(k, s, e, a) for (k, s, e), a in self.sessions.items() if not e < self.observed - self.retention]
        out.sort(key=lambda t: (t[2], t[0], t[1]))
        return out

    def find_sessions(self, key: Any, earliest_end: int, latest_start: int) -> list[tuple[Any, int, int, Any]]:
        return [t for t in self.live() if t[0] == key and t[2] >= earliest_end and t[1] <= latest_start]

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        for k, s, e, a in self.live():
            if (k, s, e) == (key, start, end):
                return a
        return None

    def fetch(self, key: Any) -> list[tuple[Any, int, int, Any]]:
        return [t for t in self.live() if t[0] == key]

    def fetch_keys(self, key_from: Any, key_to: Any) -> list[tuple[Any, int, int, Any]]:
        if key_from is not None and key_to is not None and key_from > key_to:
            return []
        return [t for t in self.live()
                if (key_from is None or t[0] >= key_from) and (key_to is None or t[0] <= key_to)]


# ---------------------------------------------------------------------------------------------
# §2.2 session-window aggregation
# ---------------------------------------------------------------------------------------------
@dataclass
class Out:
    key: Any
    value: Any
    timestamp: int

    def tup(self) -> tuple[Any, Any, int]:
        return (self.key, self.value, self.timestamp)


class SessionAggModel:
    """§2.2 steps 1-5 and the two emit strategies."""

    def __init__(self, gap: int, grace: int, init: Callable[[], Any], agg: Callable[[Any, Any, Any], Any],
                 merger: Callable[[Any, Any, Any], Any], on_close: bool = False, retention: int | None = None) -> None:
        self.gap = gap
        self.grace = grace
        self.init = init
        self.agg = agg
        self.merger = merger
        self.on_close = on_close
        self.store = SessionModel(gap + grace if retention is None else retention)
        self.stream_time = -1
        self.dropped = 0
        self.last_emitted_close: int | None = None  # None = -infinity
        # sessions that exist logically (not removed by a merge), for emit-on-close; the store may
        # already have expired some of them ([deliberate] clause of §2.2)
        self.logical: dict[tuple[Any, int, int], Any] = {}

    def process(self, key: Any, value: Any, ts: int) -> list[tuple[Any, Any, int]]:
        out: list[tuple[Any, Any, int]] = []
        if key is None:
            self.dropped += 1
            return out
        self.stream_time = max(self.stream_time, ts)
        close_time = self.stream_time - self.gap - self.grace
        found = self.store.find_sessions(key, ts - self.gap, ts + self.gap)
        agg = self.init()
        start, end = ts, ts
        for k, s, e, a in found:
            agg = self.merger(key, agg, a)
            start, end = min(start, s), max(end, e)
        if end < close_time:
            self.dropped += 1
        else:
            if (start, end) != (ts, ts):
                for k, s, e, _ in found:
                    self.store.remove(k, s, e)
                    self.logical.pop((k, s, e), None)
                    if not self.on_close:
                        out.append(((k, s, e), None, e))
            agg = self.agg(key, value, agg)
            self.store.put(key, start, end, agg)
            self.logical[(key, start, end)] = agg
            if not self.on_close:
                out.append(((key, start, end), agg, end))
        if self.on_close:
            lec = self.last_emitted_close
            due = sorted(((e, s, k), a) for (k, s, e), a in self.logical.items()   # by end, start, key
                         if (lec is None or lec <= e) and e < close_time)
            for (e, s, k), a in due:
                out.append(((k, s, e), a, e))
                del self.logical[(k, s, e)]
            self.last_emitted_close = close_time
        return out


# ---------------------------------------------------------------------------------------------
# §3 versioned store
# ---------------------------------------------------------------------------------------------
class VersionedModel:
    """§3: per key ``valid_from -> value | TOMBSTONE``; no physical expiry is needed to answer
    every read the rules allow (reads older than history retention only see the newest version)."""

    def __init__(self, history: int) -> None:
        self.history = history
        self.observed = -1
        self.versions: dict[Any, dict[int, Any]] = {}

    def put(self, key: Any, value: Any, ts: int) -> int:
        if ts < self.observed - self.history:
            return NOT_PUT
        vs = self.versions.setdefault(key, {})
        vs[ts] = TOMBSTONE if value is None else value
        self.observed = max(self.observed, ts)
        later = [t for t in vs if t > ts]
        return min(later) if later else VALID_TO_UNDEFINED

    def get(self, key: Any, as_of: int | None = None) -> tuple[Any, int, int | None] | None:
        vs = self.versions.get(key)
        if not vs:
            return None
        newest = max(vs)
        if as_of is None:
            return None if vs[newest] is TOMBSTONE else (vs[newest], newest, None)
        if as_of < self.observed - self.history:
            if newest <= as_of and vs[newest] is not TOMBSTONE:
                return (vs[newest], newest, None)
            return None
        cands = [t for t in vs if t <= as_of]
        if not cands:
            return None
        t = max(cands)
        if vs[t] is TOMBSTONE:
            return None
        later = [u for u in vs if u > t]
        return (vs[t], t, min(later) if later else None)

    def delete(self, key: Any, ts: int) -> tuple[Any, int, int | None] | None:
        if ts < self.observed - self.history:
            return None
        old = self.get(key, ts)
        self.put(key, None, ts)
        return old


# ---------------------------------------------------------------------------------------------
# §4 stream-table join
# ---------------------------------------------------------------------------------------------
@dataclass
class JoinModel:
    """§4, against a versioned table (``history``) with optional ``grace``; ``history=None``: a
    key-value table (latest value, whatever the stream record's timestamp)."""

    history: int | None
    left: bool
    joiner: Callable[[Any, Any], Any]
    grace: int | None = None
    table: VersionedModel = field(init=False)
    latest: dict[Any, Any] = field(default_factory=dict)
    buffer: list[tuple[int, Any, int, Any]] = field(default_factory=list)  # (ts, key, arrival, value)
    buffer_time: int = -1
    arrivals: int = 0

    def __post_init__(self) -> None:
        self.table = VersionedModel(0 if self.history is None else self.history)

    def table_record(self, key: Any, value: Any, ts: int) -> None:
        if key is None:
            return
        if self.history is None:
            if value is None:
                self.latest.pop(key, None)
            else:
                self.latest[key] = value
            return
        self.table.put(key, value, ts)

    def _join(self, key: Any, value: Any, ts: int) -> list[tuple[Any, Any, int]]:
        found: tuple[Any, ...] | None
        if self.history is None:
            found = None if key not in self.latest else (self.latest[key],)
        else:
            found = None if key is None else self.table.get(key, ts)
        tv = None if found is None else found[0]
        if found is None and not self.left:
            return []
        return [(key, self.joiner(value, tv), ts)]

    def stream_record(self, key: Any, value: Any, ts: int) -> list[tuple[Any, Any, int]]:
        if value is None or (key is None and not self.left):
            return []
        if self.grace is None or key is None:
            return self._join(key, value, ts)
        self.buffer.append((ts, key, self.arrivals, value))
        self.arrivals += 1
        self.buffer_time = max(self.buffer_time, ts)
        ready = sorted((r for r in self.buffer if r[0] + self.grace <= self.buffer_time),
                       key=lambda r: (r[0], r[1], r[2]))
        self.buffer = [r for r in self.buffer if not r[0] + self.grace <= self.buffer_time]
        out: list[tuple[Any, Any, int]] = []
        for ts_, key_, _, value_ in ready:
            out += self._join(key_, value_, ts_)
        return out
