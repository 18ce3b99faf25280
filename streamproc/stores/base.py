"""What every store has: a name, a kind, stream time, a drop counter and a lifecycle."""

from __future__ import annotations

import logging
from typing import Any

from ..time import NO_STREAM_TIME
from ._checks import key_type_error

log = logging.getLogger("streamproc.stores")

__all__ = ["StoreBase", "log"]

_NO_KEY = object()
#: key types whose values always order against each other (no comparison needed to admit a new key)
_ALWAYS_ORDERED = frozenset({str, bytes, int})


class StoreBase:
    """Common state of the in-memory stores.

    - ``name``: the store name (non-empty str).
    - ``kind``: ``"key_value"``, ``"window"``, ``"session"`` or ``"versioned"``.
    - ``observed_stream_time``: the largest timestamp the store was given (window start, session end,
      version timestamp), starting at -1 and never decreasing. A key-value store has no timestamps
      and stays at -1.
    - ``dropped_records``: puts that were dropped because they were late or expired.
    - ``close()`` drops the contents; ``is_open`` tells whether the store was closed.
    """

    __slots__ = ("_dropped", "_observed", "_open", "_ref_key", "name")
    kind: str = ""

    def __init__(self, name: str) -> None:
        self.name = name
        self._observed = NO_STREAM_TIME
        self._dropped = 0
        self._open = True
        self._ref_key: Any = _NO_KEY  # a key the store holds, to order new keys against

    # -- keys of one store must be mutually comparable (docs/semantics.md, "Time and stream time") ----------------
    def _check_new_key(self, key: Any) -> None:
        """Before a key the store may not hold yet is stored: TypeError (naming the store and the
        key) if it cannot be ordered against a key the store holds; an empty store takes any key."""
        ref = self._ref_key
        kind = type(key)
        if kind is type(ref) and kind in _ALWAYS_ORDERED:
            return  # orders against every key the store can hold (and the reference stays valid)
        if ref is _NO_KEY or len(self) == 0:  # type: ignore[arg-type]
            self._ref_key = key
        else:
            self._check_comparable(key)

    def _check_comparable(self, key: Any) -> None:
        """TypeError (naming the store and the key) if ``key`` cannot be ordered against the keys
        the store holds (checked against one of them, as an ordered index would)."""
        ref = self._ref_key
        kind = type(key)
        if (kind is type(ref) and kind in _ALWAYS_ORDERED) or ref is _NO_KEY or len(self) == 0:  # type: ignore[arg-type]
            return
        try:
            key < ref  # noqa: B015 - only the comparison matters
            ref < key  # noqa: B015
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None

    @property
    def observed_stream_time(self) -> int:
        return self._observed

    @property
    def dropped_records(self) -> int:
        return self._dropped

    @property
    def is_open(self) -> bool:
        return self._open

    @property
    def approximate_num_entries(self) -> int:
        return len(self)  # type: ignore[arg-type]

    def _owner(self) -> str:
        return f"{self.kind.replace('_', '-')} store {self.name!r}"

    def _clear(self) -> None:
        """Drop the contents (overridden by each store)."""

    def close(self) -> None:
        """Release the contents. The store is empty afterwards; ``is_open`` becomes False."""
        self._clear()
        self._ref_key = _NO_KEY
        self._open = False

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.name!r}, entries={self.approximate_num_entries}, "
                f"observed_stream_time={self._observed})")
