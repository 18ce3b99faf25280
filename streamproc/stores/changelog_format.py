"""Changelog record format and topic configuration (docs/semantics.md, "Changelogs and restoration").

Record keys (``K`` = the key serialised by the key serde):

- key-value and versioned stores: ``K``;
- window stores: ``K + start`` (8-byte big-endian signed), plus a 4-byte big-endian sequence
  number when the store retains duplicates (each put gets its own record);
- session stores: ``K + end + start`` (8-byte big-endian signed each).

Values are the serialised value, or ``None`` (a tombstone) for deletes. Versioned records carry the
version timestamp as the record timestamp.

Topic configs (:func:`changelog_topic_config`): key-value ``cleanup.policy=compact``; window and
session ``cleanup.policy=compact,delete`` with ``retention.ms = retention + 24 h``; versioned
``cleanup.policy=compact`` with ``min.compaction.lag.ms = history_retention + 24 h``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from itertools import starmap
from typing import Any, NamedTuple

from ..serde import show_bytes

__all__ = [
    "ADDITIONAL_RETENTION_MS",
    "ChangelogRecord",
    "changelog_records",
    "changelog_topic_config",
    "session_changelog_key",
    "session_key_suffix",
    "split_session_changelog_key",
    "split_window_changelog_key",
    "window_changelog_key",
]

#: Extra time a changelog keeps records beyond the store's retention (broker clocks are wall time).
ADDITIONAL_RETENTION_MS = 24 * 60 * 60 * 1000

_START = struct.Struct(">q")
_START_SEQ = struct.Struct(">qi")
_END_START = struct.Struct(">qq")


class ChangelogRecord(NamedTuple):
    """One changelog record: ``key`` bytes, ``value`` bytes (None = tombstone), ``timestamp`` ms."""

    key: bytes
    value: bytes | None
    timestamp: int


def changelog_records(rows: Iterable[tuple[bytes, bytes | None, int]]) -> Iterator[ChangelogRecord]:
    """A :class:`ChangelogRecord` for each ``(key, value, timestamp)`` row of ``rows``, lazily; a row
    of another length raises TypeError when it is reached (the types are not checked)."""
    return starmap(ChangelogRecord, rows)


def window_changelog_key(key_bytes: bytes, start: int, seq: int | None = None) -> bytes:
    """``key_bytes + start`` (8 bytes BE), ``+ seq`` (4 bytes BE) when ``seq`` is given."""
    if seq is None:
        return key_bytes + _START.pack(start)
    return key_bytes + _START_SEQ.pack(start, seq)


def split_window_changelog_key(data: bytes, with_seq: bool, where: str = "") -> tuple[bytes, int, int | None]:
    """Inverse of :func:`window_changelog_key`: ``(key_bytes, start, seq or None)``."""
    suffix = 12 if with_seq else 8
    if len(data) < suffix:
        raise ValueError(f"window changelog key{_at(where)} must be at least {suffix} bytes, "
                         f"got {len(data)}: {show_bytes(data)}")
    cut = len(data) - suffix
    if with_seq:
        start, seq = _START_SEQ.unpack_from(data, cut)
        return bytes(data[:cut]), start, seq
    return bytes(data[:cut]), _START.unpack_from(data, cut)[0], None


def session_changelog_key(key_bytes: bytes, end: int, start: int) -> bytes:
    """``key_bytes + end + start`` (8 bytes BE each)."""
    return key_bytes + _END_START.pack(end, start)


#: ``session_key_suffix(end, start)``: the part of a session changelog key after the key bytes.
session_key_suffix = _END_START.pack


def split_session_changelog_key(data: bytes, where: str = "") -> tuple[bytes, int, int]:
    """Inverse of :func:`session_changelog_key`: ``(key_bytes, start, end)``."""
    if len(data) < 16:
        raise ValueError(f"session changelog key{_at(where)} must be at least 16 bytes, "
                         f"got {len(data)}: {show_bytes(data)}")
    cut = len(data) - 16
    end, start = _END_START.unpack_from(data, cut)
    return bytes(data[:cut]), start, end


def _at(where: str) -> str:
    return f" of {where}" if where else ""


def changelog_topic_config(store: Any) -> dict[str, str]:
    """The configs to create the changelog topic of ``store`` (a store or a change-logging wrapper)."""
    inner = getattr(store, "inner", store)
    kind = getattr(inner, "kind", None)
    if kind == "key_value":
        return {"cleanup.policy": "compact"}
    if kind in ("window", "session"):
        return {"cleanup.policy": "compact,delete",
                "retention.ms": str(inner.retention + ADDITIONAL_RETENTION_MS)}
    if kind == "versioned":
        return {"cleanup.policy": "compact",
                "min.compaction.lag.ms": str(inner.history_retention + ADDITIONAL_RETENTION_MS)}
    raise TypeError(f"changelog_topic_config needs a store, got {type(store).__name__} {store!r}")
