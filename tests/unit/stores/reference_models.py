"""Plain reference models of the stores, written from docs/semantics.md alone.

Dicts and linear scans, no ordering structures and no expiry bookkeeping: every read filters by the
rules directly. The property tests run the real stores and these models side by side.
"""

from __future__ import annotations

from typing import Any

NOT_PUT = -(2**63)


class RefKeyValue:
    def __init__(self) -> None:
        self.data: dict[Any, Any] = {}

    def put(self, k: Any, v: Any) -> None:
        if v is None:
            self.data.pop(k, None)
        else:
            self.data[k] = v

    def get(self, k: Any) -> Any:
        return self.data.get(k)

    def delete(self, k: Any) -> Any:
        return self.data.pop(k, None)

    def put_if_absent(self, k: Any, v: Any) -> Any:
        old = self.data.get(k)
        if old is None and v is not None:
            self.data[k] = v
        return old

    def range(self, lo: Any, hi: Any, backward: bool = False) -> list[tuple[Any, Any]]:
        if lo is not None and hi is not None and lo > hi:
            return []
        out = sorted((k, v) for k, v in self.data.items()
                     if (lo is None or k >= lo) and (hi is None or k <= hi))
        return out[::-1] if backward else out


class RefWindow:
    def __init__(self, retention: int, size: int, grace: int, dups: bool) -> None:
        self.retention, self.size, self.grace, self.dups = retention, size, grace, dups
        self.observed = -1
        self.dropped = 0
        self.entries: list[list[Any]] = []  # [key, start, value] in put order (dups) / one per (key, start)

    def _live(self, start: int) -> bool:
        return start > self.observed - self.retention

    def put(self, k: Any, v: Any, start: int) -> bool:
        self.observed = max(self.observed, start)
        if start <= self.observed - self.grace:
            self.dropped += 1
            return False
        if self.dups:
            if v is not None:
                self.entries.append([k, start, v])
            return True
        for e in self.entries:
            if e[0] == k and e[1] == start:
                if v is None:
                    self.entries.remove(e)
                else:
                    e[2] = v
                return True
        if v is not None:
            self.entries.append([k, start, v])
        return True

    def get(self, k: Any, start: int) -> Any:
        found = [e[2] for e in self.entries if e[0] == k and e[1] == start and self._live(start)]
        return found[-1] if found else None

    def fetch(self, k: Any, tf: Any, tt: Any, backward: bool = False) -> list[tuple[int, Any]]:
        rows = [e for e in self.entries if e[0] == k and self._live(e[1])
                and (tf is None or e[1] >= tf) and (tt is None or e[1] <= tt)]
        rows.sort(key=lambda e: e[1])  # stable: duplicates stay in put order
        out = [(e[1], e[2]) for e in rows]
        return out[::-1] if backward else out

    def fetch_keys(self, kf: Any, kt: Any, tf: Any, tt: Any, backward: bool = False) -> list[tuple[Any, Any]]:
        if kf is not None and kt is not None and kf > kt:
            return []
        rows = [e for e in self.entries if self._live(e[1])
                and (kf is None or e[0] >= kf) and (kt is None or e[0] <= kt)
                and (tf is None or e[1] >= tf) and (tt is None or e[1] <= tt)]
        rows.sort(key=lambda e: (e[1], e[0]))
        out = [((e[0], e[1], e[1] + self.size), e[2]) for e in rows]
        return out[::-1] if backward else out

    def count(self) -> int:
        return sum(1 for e in self.entries if self._live(e[1]))


class RefSession:
    def __init__(self, retention: int) -> None:
        self.retention = retention
        self.observed = -1
        self.dropped = 0
        self.sessions: dict[tuple[Any, int, int], Any] = {}  # (key, start, end) -> agg

    def _live(self, end: int) -> bool:
        return not end < self.observed - self.retention

    def put(self, k: Any, start: int, end: int, agg: Any, count: bool = True) -> bool:
        self.observed = max(self.observed, end)
        if not self._live(end):
            self.dropped += count
            return False
        if agg is None:
            self.sessions.pop((k, start, end), None)
        else:
            self.sessions[(k, start, end)] = agg
        return True

    def remove(self, k: Any, start: int, end: int) -> bool:
        """Kafka's remove: deletes the session, leaves the observed time alone, counts no drop."""
        if not self._live(end):
            return False
        self.sessions.pop((k, start, end), None)
        return True

    def _rows(self) -> list[tuple[tuple[Any, int, int], Any]]:
        return [(s, a) for s, a in self.sessions.items() if self._live(s[2])]

    def find_sessions(self, k: Any, earliest_end: int, latest_start: int) -> list[tuple[tuple[Any, int, int], Any]]:
        rows = [(s, a) for s, a in self._rows() if s[0] == k and s[2] >= earliest_end and s[1] <= latest_start]
        rows.sort(key=lambda r: (r[0][2], r[0][1]))
        return rows

    def fetch_session(self, k: Any, start: int, end: int) -> Any:
        return self.sessions.get((k, start, end)) if self._live(end) else None

    def fetch_keys(self, kf: Any, kt: Any) -> list[tuple[tuple[Any, int, int], Any]]:
        if kf is not None and kt is not None and kf > kt:
            return []
        rows = [(s, a) for s, a in self._rows()
                if (kf is None or s[0] >= kf) and (kt is None or s[0] <= kt)]
        rows.sort(key=lambda r: (r[0][2], r[0][0], r[0][1]))
        return rows


class RefVersioned:
    def __init__(self, history: int) -> None:
        self.history = history
        self.observed = -1
        self.dropped = 0
        self.versions: dict[Any, dict[int, Any]] = {}  # key -> {valid_from: value or None}

    def put(self, k: Any, v: Any, ts: int) -> int:
        if ts < self.observed - self.history:
            self.dropped += 1
            return NOT_PUT
        self.versions.setdefault(k, {})[ts] = v
        self.observed = max(self.observed, ts)
        later = [t for t in self.versions[k] if t > ts]
        return min(later) if later else -1

    def get(self, k: Any, as_of: Any = None) -> Any:
        vs = self.versions.get(k)
        if not vs:
            return None
        newest = max(vs)
        if as_of is None or as_of < self.observed - self.history:
            if as_of is not None and newest > as_of:
                return None
            return None if vs[newest] is None else (vs[newest], newest, None)
        older = [t for t in vs if t <= as_of]
        if not older:
            return None
        t = max(older)
        if vs[t] is None:
            return None
        later = [u for u in vs if u > t]
        return (vs[t], t, min(later) if later else None)

    def delete(self, k: Any, ts: int) -> Any:
        if ts < self.observed - self.history:
            self.dropped += 1
            return None
        old = self.get(k, ts)
        self.put(k, None, ts)
        return old
