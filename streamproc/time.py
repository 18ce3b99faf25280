"""Durations and timestamps.

Every public argument that is a duration accepts ``int`` milliseconds or a
``datetime.timedelta``; :func:`duration_ms` is the one place that normalises them.
Negative durations are rejected with ``ValueError`` naming the argument and its owner.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Union

Duration = Union[int, timedelta]

#: Stream time before any record was seen.
NO_STREAM_TIME = -1


def duration_ms(value: Duration, arg: str, owner: str = "", *, allow_zero: bool = True) -> int:
    """Return ``value`` as whole milliseconds.

    ``owner`` names what the duration belongs to (a store, a window definition) so the error says
    where it came from: ``duration_ms(-5, "grace", "store 'clicks'")`` raises
    ``ValueError("grace of store 'clicks' must not be negative, got -5 ms")``.
    """
    where = f" of {owner}" if owner else ""
    if isinstance(value, bool):
        raise TypeError(f"{arg}{where} must be int milliseconds or timedelta, got bool {value!r}")
    if isinstance(value, timedelta):
        ms = (value.days * 86_400_000) + (value.seconds * 1000) + (value.microseconds // 1000)
    elif isinstance(value, int):
        ms = value
    else:
        raise TypeError(
            f"{arg}{where} must be int milliseconds or timedelta, got {type(value).__name__} {value!r}"
        )
    if ms < 0:
        raise ValueError(f"{arg}{where} must not be negative, got {ms} ms")
    if not allow_zero and ms == 0:
        raise ValueError(f"{arg}{where} must be positive, got {ms} ms")
    return ms


def timestamp_ms(value: object, arg: str = "timestamp", owner: str = "") -> int:
    """Validate a record timestamp (int milliseconds since the epoch)."""
    if isinstance(value, bool) or not isinstance(value, int):
        where = f" of {owner}" if owner else ""
        raise TypeError(f"{arg}{where} must be int milliseconds, got {type(value).__name__} {value!r}")
    return value
