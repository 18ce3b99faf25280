"""Window kinds and emit strategies: session windows (docs/semantics.md, "Session windows"), time
windows and join windows (docs/windows.md).

- :class:`SessionWindows`: records of one key at most ``gap`` apart share a session.
- :class:`TimeWindows`: fixed-size windows ``[start, start + size)`` whose starts are the multiples
  of ``advance`` (``advance == size``: tumbling; ``advance < size``: hopping, windows overlap).
  Starts are aligned to the epoch and never negative, so a record at ``ts`` is in every window with
  ``0 <= start <= ts < start + size``. A window is *closed* once ``stream_time - grace >= end``.
- :class:`JoinWindows`: a record of the left stream at ``ts1`` and one of the right stream at
  ``ts2`` join when ``ts1 - before <= ts2 <= ts1 + after`` (``before == after == diff``: when
  ``|ts1 - ts2| <= diff``); ``grace`` is how long after that range a record may still arrive.
- :class:`EmitStrategy`: when a windowed aggregation forwards its results.

All durations are int milliseconds or ``timedelta``; negative ones are a ``ValueError``.
"""

from __future__ import annotations

import enum
from typing import Any

from ..time import Duration, duration_ms

__all__ = ["EmitStrategy", "JoinWindows", "SessionWindows", "TimeWindows", "check_emit"]


class EmitStrategy(enum.Enum):
    """When a windowed aggregation forwards its results.

    - ``ON_WINDOW_UPDATE`` (default): every update, and a tombstone for every session merged away.
    - ``ON_WINDOW_CLOSE``: nothing on update; each session is forwarded once, after the record that
      moves the close time (``stream_time - gap - grace``) past its end; each time window once, by
      the record that moves ``stream_time - grace`` to or past its end (timestamp ``end - 1``;
      docs/windows.md).
    """

    ON_WINDOW_UPDATE = "on_window_update"
    ON_WINDOW_CLOSE = "on_window_close"

    @classmethod
    def on_window_update(cls) -> EmitStrategy:
        return cls.ON_WINDOW_UPDATE

    @classmethod
    def on_window_close(cls) -> EmitStrategy:
        return cls.ON_WINDOW_CLOSE


def check_emit(emit: Any) -> EmitStrategy:
    """``emit`` if it is an :class:`EmitStrategy`, else a ``ValueError`` naming the value."""
    if not isinstance(emit, EmitStrategy):
        raise ValueError(f"emit must be an EmitStrategy (ON_WINDOW_UPDATE or ON_WINDOW_CLOSE), got {emit!r}")  # noqa: TRY004 - bad input is a ValueError
    return emit


class SessionWindows:
    """Session windows: records of one key at most ``gap`` apart (inclusive) share a session.

    ``grace`` is how long after a session's end (in stream time) records may still join it:
    a session closes when ``stream_time - gap - grace > end``. ``gap`` must be positive and ``grace``
    non-negative; both accept int milliseconds or ``timedelta``.

    >>> SessionWindows.of_inactivity_gap_and_grace(gap=300_000, grace=60_000)
    SessionWindows(gap=300000, grace=60000)
    """

    __slots__ = ("gap_ms", "grace_ms")

    def __init__(self, gap: Duration, grace: Duration = 0) -> None:
        gap_ms = duration_ms(gap, "gap", "SessionWindows")
        if gap_ms <= 0:
            raise ValueError(f"gap of SessionWindows must be positive, got {gap_ms} ms")
        self.gap_ms = gap_ms
        self.grace_ms = duration_ms(grace, "grace", "SessionWindows")

    @classmethod
    def of_inactivity_gap_and_grace(cls, gap: Duration, grace: Duration) -> SessionWindows:
        """Sessions with inactivity ``gap`` that accept late records for ``grace`` after they end."""
        return cls(gap, grace)

    @classmethod
    def of_inactivity_gap_with_no_grace(cls, gap: Duration) -> SessionWindows:
        """Sessions with inactivity ``gap`` and grace 0."""
        return cls(gap, 0)

    @property
    def inactivity_gap(self) -> int:
        return self.gap_ms

    @property
    def grace_period(self) -> int:
        return self.grace_ms

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SessionWindows) and (self.gap_ms, self.grace_ms) == (other.gap_ms, other.grace_ms)

    def __hash__(self) -> int:
        return hash((self.gap_ms, self.grace_ms))

    def __repr__(self) -> str:
        return f"SessionWindows(gap={self.gap_ms}, grace={self.grace_ms})"



class TimeWindows:
    """Tumbling (``advance == size``) or hopping (``advance < size``) time windows.

    >>> TimeWindows.of_size_and_grace(60_000, 10_000)
    TimeWindows(size=60000, advance=60000, grace=10000)
    >>> TimeWindows.of_size_with_no_grace(10).advance_by(5).windows_for(12)
    [(5, 15), (10, 20)]
    """

    __slots__ = ("advance_ms", "grace_ms", "size_ms")

    def __init__(self, size: Duration, grace: Duration = 0, advance: Duration | None = None) -> None:
        size_ms = duration_ms(size, "size", "TimeWindows")
        if size_ms <= 0:
            raise ValueError(f"size of TimeWindows must be positive, got {size_ms} ms")
        self.size_ms = size_ms
        self.grace_ms = duration_ms(grace, "grace", "TimeWindows")
        self.advance_ms = size_ms if advance is None else _check_advance(advance, size_ms)

    @classmethod
    def of_size_and_grace(cls, size: Duration, grace: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` that accept records up to ``grace`` after their end."""
        return cls(size, grace)

    @classmethod
    def of_size_with_no_grace(cls, size: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` with grace 0."""
        return cls(size, 0)

    def advance_by(self, advance: Duration) -> TimeWindows:
        """Hopping windows: the same size and grace, a new window every ``advance``
        (``0 < advance <= size``, else ``ValueError``)."""
        return TimeWindows(self.size_ms, self.grace_ms, advance)

    @property
    def size(self) -> int:
        return self.size_ms

    @property
    def advance(self) -> int:
        return self.advance_ms

    @property
    def grace_period(self) -> int:
        return self.grace_ms

    @property
    def tumbling(self) -> bool:
        return self.advance_ms == self.size_ms

    def windows_for(self, timestamp: int) -> list[tuple[int, int]]:
        """The windows ``(start, end)`` containing ``timestamp``, by start (none for ``timestamp < 0``)."""
        size, advance = self.size_ms, self.advance_ms
        first = max(0, timestamp - size + advance) // advance * advance
        return [(start, start + size) for start in range(first, timestamp + 1, advance)]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TimeWindows) and (self.size_ms, self.advance_ms, self.grace_ms) == (
            other.size_ms, other.advance_ms, other.grace_ms)

    def __hash__(self) -> int:
        return hash((self.size_ms, self.advance_ms, self.grace_ms))

    def __repr__(self) -> str:
        return f"TimeWindows(size={self.size_ms}, advance={self.advance_ms}, grace={self.grace_ms})"


def _check_advance(advance: Duration, size_ms: int) -> int:
    advance_ms = duration_ms(advance, "advance", "TimeWindows")
    if not 0 < advance_ms <= size_ms:
        raise ValueError(f"advance of TimeWindows must be positive and at most the window size {size_ms} ms, "
                         f"got {advance_ms} ms")
    return advance_ms


class JoinWindows:
    """The time range within which records of two streams join (stream-stream join).

    A left record at ``ts1`` and a right record at ``ts2`` with the same key join when
    ``ts1 - before <= ts2 <= ts1 + after``; ``of_time_difference_and_grace(diff, grace)`` sets
    ``before = after = diff`` (``|ts1 - ts2| <= diff``). ``grace``: records may arrive up to ``grace``
    after the end of their join range (in stream time) and still join; later ones are dropped.

    >>> JoinWindows.of_time_difference_and_grace(600_000, 60_000)
    JoinWindows(before=600000, after=600000, grace=60000)
    """

    __slots__ = ("after_ms", "before_ms", "grace_ms")

    def __init__(self, before: Duration, after: Duration, grace: Duration = 0) -> None:
        self.before_ms = duration_ms(before, "before", "JoinWindows")
        self.after_ms = duration_ms(after, "after", "JoinWindows")
        self.grace_ms = duration_ms(grace, "grace", "JoinWindows")

    @classmethod
    def of_time_difference_and_grace(cls, time_difference: Duration, grace: Duration) -> JoinWindows:
        """Records at most ``time_difference`` apart join; records up to ``grace`` late are accepted."""
        diff = duration_ms(time_difference, "time_difference", "JoinWindows")
        return cls(diff, diff, grace)

    @classmethod
    def of_time_difference_with_no_grace(cls, time_difference: Duration) -> JoinWindows:
        """Records at most ``time_difference`` apart join; grace 0."""
        diff = duration_ms(time_difference, "time_difference", "JoinWindows")
        return cls(diff, diff, 0)

    def before(self, before: Duration) -> JoinWindows:
        """The same windows, but a right record may be up to ``before`` earlier than the left one."""
        return JoinWindows(before, self.after_ms, self.grace_ms)

    def after(self, after: Duration) -> JoinWindows:
        """The same windows, but a right record may be up to ``after`` later than the left one."""
        return JoinWindows(self.before_ms, after, self.grace_ms)

    @property
    def grace_period(self) -> int:
        return self.grace_ms

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JoinWindows) and (self.before_ms, self.after_ms, self.grace_ms) == (
            other.before_ms, other.after_ms, other.grace_ms)

    def __hash__(self) -> int:
        return hash((self.before_ms, self.after_ms, self.grace_ms))

    def __repr__(self) -> str:
        return f"JoinWindows(before={self.before_ms}, after={self.after_ms}, grace={self.grace_ms})"
