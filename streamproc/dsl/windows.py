"""Session windows and emit strategies (docs/semantics.md, "Session windows")."""

from __future__ import annotations

import enum
from typing import Any

from ..time import Duration, duration_ms

__all__ = ["EmitStrategy", "SessionWindows", "check_emit"]


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
