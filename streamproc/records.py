"""The record types every layer shares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

Headers = Sequence[tuple[str, bytes]]


class Windowed(NamedTuple):
    """A key in a window.

    Time windows are ``[start, end)`` (end exclusive, ``end = start + size``); session windows are
    ``[start, end]`` (both inclusive; a single-record session is ``[t, t]``).
    """

    key: Any
    start: int
    end: int

    def __repr__(self) -> str:
        return f"Windowed({self.key!r}, {self.start}, {self.end})"


class KeyValue(NamedTuple):
    """An item of a store range read: ``(key, value)``.

    For a single-key window fetch the key is the window start; for multi-key window and session
    reads it is a :class:`Windowed`.
    """

    key: Any
    value: Any


@dataclass(slots=True)
class Record:
    """A record as it enters or leaves a topology.

    Equality compares ``key``, ``value`` and ``timestamp`` only; ``headers`` and the position
    (``topic``, ``partition``, ``offset``) are carried along for context and error reports.
    """

    key: Any
    value: Any
    timestamp: int
    headers: Headers = field(default=(), compare=False)
    topic: str | None = field(default=None, compare=False)
    partition: int | None = field(default=None, compare=False)
    offset: int | None = field(default=None, compare=False)

    def position(self) -> str:
        """``topic[partition]@offset`` for messages, or ``"?"`` parts when unknown."""
        t = self.topic if self.topic is not None else "?"
        p = self.partition if self.partition is not None else "?"
        o = self.offset if self.offset is not None else "?"
        return f"{t}[{p}]@{o}"
