"""Brute-force reference models written from docs/semantics.md ("Session windows", "Versioned store", "Versioned tables and as-of joins") alone.

They share no code with streamproc: plain lists and dicts, linear scans, re-sorting everything on
every step. Each returns the expected output as a list of ``(key, value, timestamp)`` tuples, where a
session key is ``(key, start, end)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Out = list[tuple[Any, Any, int]]


class SessionReference:
    """Session-window aggregation with ``gap``, ``grace``, store ``retention`` (default gap + grace)."""

    def __init__(self, gap: int, grace: int, initializer: Callable[[], Any],
                 aggregator: Callable[[Any, Any, Any], Any], merger: Callable[[Any, Any, Any], Any],
                 on_close: bool = False, retention: int | None = None) -> None:
        self.gap, self.grace = gap, grace
        self.retention = gap + grace if retention is None else retention
        self.init, self.agg, self.merge = initializer, aggregator, merger
        self.on_close = on_close
        self.sessions: dict[tuple[Any, int, int], Any] = {}   # (key, start, end) -> aggregate
        self.stream_time = -1
        self.observed = -1        # largest session end the store was given
        self.last_emitted_close = -1
        self.late = 0
        self.null_keys = 0

    def _visible(self, key: Any, start: int, end: int) -> bool:
        return end >= self.observed - self.retention

    def process(self, key: Any, value: Any, ts: int) -> Out:
        out: Out = []
        if key is None:
            self.null_keys += 1
            return out
        self.stream_time = max(self.stream_time, ts)
        close_time = self.stream_time - self.gap - self.grace
        found = sorted(
            ((s, e) for (k, s, e) in self.sessions
             if k == key and self._visible(k, s, e) and e >= ts - self.gap and s <= ts + self.gap),
            key=lambda se: (se[1], se[0]))
        agg = self.init()
        start, end = ts, ts
        for s, e in found:
            agg = self.merge(key, agg, self.sessions[(key, s, e)])
            start, end = min(start, s), max(end, e)
        if end < close_time:
            self.late += 1
        else:
            if (start, end) != (ts, ts):
                for s, e in found:
                    del self.sessions[(key, s, e)]
                    self.observed = max(self.observed, e)
                    if not self.on_close:
                        out.append(((key, s, e), None, e))
            agg = self.agg(key, value, agg)
            self.sessions[(key, start, end)] = agg
            self.observed = max(self.observed, end)
            if not self.on_close:
                out.append(((key, start, end), agg, end))
        if self.on_close:
            closing = sorted(((e, s, k) for (k, s, e) in self.sessions          # by end, start, key
                              if self.last_emitted_close <= e < close_time), key=lambda t: (t[0], t[1], t[2]))
            for e, s, k in closing:
                out.append(((k, s, e), self.sessions[(k, s, e)], e))
            self.last_emitted_close = close_time
        return out


class VersionedTableReference:
    """A versioned table with history retention ``history`` (docs/semantics.md, "Versioned store")."""

    def __init__(self, history: int) -> None:
        self.history = history
        self.versions: dict[Any, dict[int, Any]] = {}   # key -> {valid_from: value or TOMBSTONE}
        self.observed = -1

    TOMBSTONE = object()

    def put(self, key: Any, value: Any, ts: int) -> bool:
        """Store a version; True when it became the newest version of its key."""
        if ts < self.observed - self.history:
            return False
        self.versions.setdefault(key, {})[ts] = self.TOMBSTONE if value is None else value
        self.observed = max(self.observed, ts)
        return ts == max(self.versions[key])

    def get(self, key: Any, as_of: int) -> Any:
        vs = self.versions.get(key, {})
        if not vs:
            return None
        if as_of < self.observed - self.history:
            newest = max(vs)
            value = vs[newest] if newest <= as_of else None
        else:
            older = [t for t in vs if t <= as_of]
            value = vs[max(older)] if older else None
        return None if value is self.TOMBSTONE else value


class JoinReference:
    """Stream-table join against a versioned table, optional grace buffer (docs/semantics.md, "Versioned tables and as-of joins")."""

    def __init__(self, history: int, joiner: Callable[[Any, Any], Any], left: bool,
                 grace: int | None = None) -> None:
        self.table = VersionedTableReference(history)
        self.joiner, self.left, self.grace = joiner, left, grace
        self.buffer: list[tuple[int, Any, int, Any]] = []   # (ts, key, arrival, value)
        self.buffer_time = -1
        self.arrivals = 0

    def table_update(self, key: Any, value: Any, ts: int) -> None:
        if key is not None:
            self.table.put(key, value, ts)

    def _join(self, key: Any, value: Any, ts: int) -> Out:
        table_value = None if key is None else self.table.get(key, ts)
        if table_value is None and not self.left:
            return []
        return [(key, self.joiner(value, table_value), ts)]

    def stream_record(self, key: Any, value: Any, ts: int) -> Out:
        if value is None:
            return []
        if key is None:
            return self._join(None, value, ts) if self.left else []
        if self.grace is None:
            return self._join(key, value, ts)
        self.buffer_time = max(self.buffer_time, ts)
        if ts < self.buffer_time - self.grace:
            return self._join(key, value, ts)
        self.buffer.append((ts, key, self.arrivals, value))
        self.arrivals += 1
        self.buffer.sort(key=lambda item: (item[0], item[1], item[2]))
        out: Out = []
        while self.buffer and self.buffer[0][0] + self.grace <= self.buffer_time:
            ts0, key0, _, value0 = self.buffer.pop(0)
            out += self._join(key0, value0, ts0)
        return out
