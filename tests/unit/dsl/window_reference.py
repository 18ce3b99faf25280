"""Brute-force reference models of time-window aggregation and the windowed stream-stream join,
written from the rules in docs/windows.md alone.

They share no code with streamproc: plain lists and dicts, linear scans, re-sorting on every step,
nothing ever expires. Each returns the expected output as a list of ``(key, value, timestamp)``
tuples, where a windowed key is ``(key, start, end)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Out = list[tuple[Any, Any, int]]


class TimeWindowReference:
    """Tumbling/hopping aggregation: windows ``[start, start + size)``, starts = multiples of ``advance``
    that are >= 0; closed when ``stream_time - grace >= end``."""

    def __init__(self, size: int, advance: int, grace: int, initializer: Callable[[], Any],
                 aggregator: Callable[[Any, Any, Any], Any], on_close: bool = False) -> None:
        self.size, self.advance, self.grace = size, advance, grace
        self.init, self.agg = initializer, aggregator
        self.on_close = on_close
        self.windows: dict[tuple[Any, int], tuple[Any, int]] = {}   # (key, start) -> (aggregate, max ts)
        self.stream_time = -1
        self.last_emitted_close = -1
        self.late = 0

    def process(self, key: Any, value: Any, ts: int) -> Out:
        out: Out = []
        if key is None or ts < 0:
            return out
        self.stream_time = max(self.stream_time, ts)
        close_time = self.stream_time - self.grace
        starts = [s for s in range(0, ts + 1, self.advance) if s <= ts < s + self.size]
        updated = 0
        for start in starts:
            end = start + self.size
            if end <= close_time:
                continue
            updated += 1
            old = self.windows.get((key, start))
            agg = self.agg(key, value, self.init() if old is None else old[0])
            stamp = ts if old is None else max(ts, old[1])
            self.windows[(key, start)] = (agg, stamp)
            if not self.on_close:
                out.append(((key, start, end), agg, stamp))
        if not updated:
            self.late += 1
        if self.on_close and close_time > self.last_emitted_close:
            closing = sorted((start, k) for (k, start) in self.windows
                             if self.last_emitted_close < start + self.size <= close_time)
            for start, k in closing:
                out.append(((k, start, start + self.size), self.windows[(k, start)][0], start + self.size - 1))
            self.last_emitted_close = close_time
        return out


@dataclass
class _Rec:
    side: int          # 0 left, 1 right
    key: Any
    value: Any
    ts: int
    arrival: int
    matched: bool = False
    reported: bool = False


class StreamJoinReference:
    """Windowed stream-stream join (``kind`` in join | left_join | outer_join): left ``ts1`` and right
    ``ts2`` are in each other's window when ``ts1 - before <= ts2 <= ts1 + after``. A record is late
    when ``ts < T - (its side's extent + grace)``; every accepted pair in the window joins once; an
    unmatched record of an outer side is reported once ``T > ts + before + after + grace``."""

    def __init__(self, before: int, after: int, grace: int, kind: str,
                 joiner: Callable[[Any, Any], Any]) -> None:
        self.before, self.after, self.grace = before, after, grace
        self.outer = (kind in ("left_join", "outer_join"), kind == "outer_join")
        self.joiner = joiner
        self.records: list[_Rec] = []
        self.stream_time = -1
        self.arrivals = 0
        self.late = 0

    def _late(self, r: _Rec, t: int) -> bool:
        return r.ts < t - ((self.after if r.side == 0 else self.before) + self.grace)

    def _final(self, r: _Rec, t: int) -> bool:
        return t > r.ts + self.before + self.after + self.grace

    def _in_window(self, left_ts: int, right_ts: int) -> bool:
        return left_ts - self.before <= right_ts <= left_ts + self.after

    def process(self, side: int, key: Any, value: Any, ts: int) -> Out:
        out: Out = []
        if value is None:
            return out
        if key is None:
            if self.outer[side]:
                out.append((None, self.joiner(value, None) if side == 0 else self.joiner(None, value), ts))
            return out
        t = max(self.stream_time, ts)
        record = _Rec(side, key, value, ts, self.arrivals)
        self.arrivals += 1
        if self._late(record, t):
            self.late += 1
            return out
        closing = sorted((r for r in self.records
                          if self.outer[r.side] and not r.matched and not r.reported and self._final(r, t)),
                         key=lambda r: (r.ts, r.side, r.key, r.arrival))
        for r in closing:
            r.reported = True
            out.append((r.key, self.joiner(r.value, None) if r.side == 0 else self.joiner(None, r.value), r.ts))
        partners = sorted((r for r in self.records
                           if r.side != side and r.key == key
                           and (self._in_window(ts, r.ts) if side == 0 else self._in_window(r.ts, ts))),
                          key=lambda r: (r.ts, r.arrival))
        for r in partners:
            r.matched = record.matched = True
            pair = self.joiner(value, r.value) if side == 0 else self.joiner(r.value, value)
            out.append((key, pair, max(ts, r.ts)))
        self.stream_time = t
        self.records.append(record)
        return out
