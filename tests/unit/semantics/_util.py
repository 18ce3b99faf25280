"""Small helpers shared by the tests of docs/semantics.md."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def kvs(it: Iterable[Any]) -> list[tuple[Any, Any]]:
    """A store range read as plain ``(key, value)`` tuples; ``Windowed`` keys become ``(key, start, end)``."""
    out = []
    for item in it:
        k, v = item
        out.append((tuple(k) if isinstance(k, tuple) else k, v))
    return out


def recs(records: Iterable[Any]) -> list[tuple[Any, Any, int]]:
    """Driver output records as ``(key, value, timestamp)``; ``Windowed`` keys become tuples."""
    return [(tuple(r.key) if isinstance(r.key, tuple) else r.key, r.value, r.timestamp) for r in records]


def seqs(elements: Any, short: int = 40, long: int = 150) -> Any:
    """Lists of ``elements``: half of the examples short (hypothesis' usual few items), half long
    (``short..long`` items), so long histories with much interplay are tried too."""
    from hypothesis import strategies as st

    return st.one_of(st.lists(elements, max_size=short), st.lists(elements, min_size=short, max_size=long))
