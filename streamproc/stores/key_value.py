"""In-memory key-value store: one ordered map key -> value.

Rules:

- ``put(key, value)`` stores ``value``; ``value is None`` deletes the key.
- ``put_if_absent(key, value)`` stores only when the key has no value; returns the old value (None
  when it stored).
- ``delete(key)`` removes the key and returns its old value (or None).
- ``range(key_from, key_to, backward=False)``: keys in ``[key_from, key_to]`` (both inclusive; a
  ``None`` bound is open), ascending (descending when backward). ``key_from > key_to`` yields
  nothing and logs a warning.
- ``all(backward=False)``: every entry, in key order.
- Range reads return a :class:`~streamproc.stores.iterators.StoreIterator` over a snapshot taken at
  call time.
- Keys must be hashable and mutually comparable; ``None`` keys are rejected with ``ValueError``.

The store has no timestamps: ``observed_stream_time`` stays -1 and nothing is ever dropped.

Export and import (snapshots, changelog restore): ``export_records()`` gives the contents as
``(key, value)`` pairs - the arguments of ``put`` - in key order; ``import_records(pairs)`` puts
them (into an empty store: the same contents).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sortedcontainers import SortedDict

from ..records import KeyValue
from ._checks import check_name, fail_key, key_type_error, keys_not_comparable
from .base import StoreBase, log
from .iterators import StoreIterator, key_values

__all__ = ["KeyValueStore"]


class KeyValueStore(StoreBase):
    """An ordered in-memory key-value store (``sortedcontainers.SortedDict``)."""

    __slots__ = ("_map",)
    kind = "key_value"

    def __init__(self, name: str) -> None:
        super().__init__(check_name(name, "key-value"))
        self._map: SortedDict = SortedDict()

    # -- point operations -------------------------------------------------------------------
    def get(self, key: Any) -> Any:
        """The value of ``key``, or None."""
        if key is None:
            fail_key(self._owner())
        try:
            return self._map.get(key)
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None

    def put(self, key: Any, value: Any) -> None:
        """Store ``value`` under ``key``; ``None`` deletes the key."""
        if key is None:
            fail_key(self._owner())
        m = self._map
        try:
            if value is None:
                m.pop(key, None)
            elif key in m:
                _dict_set(m, key, value)  # existing key: the sorted key list is unchanged
            else:
                m[key] = value
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None

    def put_if_absent(self, key: Any, value: Any) -> Any:
        """Store ``value`` only if ``key`` has no value; return the previous value (None if it stored)."""
        old = self.get(key)
        if old is None and value is not None:
            self.put(key, value)
        return old

    def put_all(self, entries: Iterable[tuple[Any, Any]]) -> None:
        """``put`` each ``(key, value)`` in order."""
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: Any) -> Any:
        """Remove ``key``; return its previous value (or None)."""
        if key is None:
            fail_key(self._owner())
        try:
            return self._map.pop(key, None)
        except TypeError as exc:
            raise key_type_error(self._owner(), key, exc) from None

    # -- range reads ------------------------------------------------------------------------
    def range(self, key_from: Any = None, key_to: Any = None, backward: bool = False) -> StoreIterator[KeyValue]:
        """Entries with ``key_from <= key <= key_to`` (None bounds open), in key order."""
        m = self._map
        if key_from is not None and key_to is not None:
            try:
                if key_from > key_to:
                    log.warning("%s: range with key_from %r > key_to %r returns nothing",
                                self._owner(), key_from, key_to)
                    return StoreIterator([])
            except TypeError as exc:
                raise keys_not_comparable(self._owner(), exc) from None
        try:
            keys = list(m.irange(key_from, key_to, reverse=backward))
        except TypeError as exc:
            raise keys_not_comparable(self._owner(), exc) from None
        return StoreIterator(key_values(keys, map(m.__getitem__, keys)))

    def all(self, backward: bool = False) -> StoreIterator[KeyValue]:
        """Every entry in key order (descending when backward)."""
        m = self._map
        keys = list(reversed(m.keys()) if backward else m.keys())
        return StoreIterator(key_values(keys, map(m.__getitem__, keys)))

    # -- export and import ------------------------------------------------------------------
    def export_records(self) -> list[tuple[Any, Any]]:
        """The contents as ``(key, value)`` pairs (the arguments of :meth:`put`), in key order."""
        m = self._map
        return list(zip(m.keys(), m.values(), strict=True))

    def import_records(self, records: Iterable[tuple[Any, Any]]) -> int:
        """``put(key, value)`` for each pair of ``records`` in order; returns the number of pairs."""
        put = self.put
        count = 0
        for key, value in records:
            put(key, value)
            count += 1
        return count

    def count(self) -> int:
        """Number of keys."""
        return len(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, key: Any) -> bool:
        return key is not None and key in self._map

    def _clear(self) -> None:
        self._map.clear()


_dict_set = dict.__setitem__
