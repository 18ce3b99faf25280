"""Snapshot iterators returned by store range reads.

A range read materialises its result when it is called, so the iterator yields the state of the
store *at the moment of the call*: later puts, deletes and expiry do not change what an open
iterator yields (KIP-428's snapshot rule). Iterators support ``close()`` and ``with``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any, Generic, TypeVar

from ..records import KeyValue, Windowed

T = TypeVar("T")

__all__ = ["StoreIterator", "key_values", "new_key_value", "new_windowed"]

#: ``new_key_value((key, value))`` -> ``KeyValue(key, value)`` without the NamedTuple ``__new__``
#: wrapper (a C-level call; for bulk results, :func:`key_values`).
new_key_value = partial(tuple.__new__, KeyValue)
#: ``new_windowed((key, start, end))`` -> ``Windowed(key, start, end)``, the same way.
new_windowed = partial(tuple.__new__, Windowed)


def key_values(keys: Iterable[Any], values: Iterable[Any]) -> list[KeyValue]:
    """``[KeyValue(k, v) for k, v in zip(keys, values)]``, built at C speed."""
    return list(map(new_key_value, zip(keys, values)))


class StoreIterator(Generic[T]):
    """An iterator over a materialised list of results (``KeyValue`` items).

    ``close()`` releases the snapshot; iterating a closed iterator yields nothing more.
    ``peek_next_key()`` returns the key of the next item without consuming it (None at the end).
    """

    __slots__ = ("_items", "_pos")

    def __init__(self, items: list[T]) -> None:
        self._items = items
        self._pos = 0

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        pos = self._pos
        items = self._items
        if pos >= len(items):
            raise StopIteration
        self._pos = pos + 1
        return items[pos]

    def has_next(self) -> bool:
        """True while another item remains."""
        return self._pos < len(self._items)

    def peek_next_key(self) -> object:
        """The key (first field) of the next item, or None when exhausted."""
        if self._pos >= len(self._items):
            return None
        return self._items[self._pos][0]  # type: ignore[index]

    def remaining(self) -> int:
        """How many items have not been consumed yet."""
        return len(self._items) - self._pos

    def close(self) -> None:
        """Release the snapshot; the iterator is exhausted afterwards."""
        self._items = []
        self._pos = 0

    def __enter__(self) -> StoreIterator[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StoreIterator(remaining={self.remaining()})"
