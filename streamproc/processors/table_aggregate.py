"""``KTable.group_by(selector)`` and the aggregations of the grouped table (docs/semantics.md,
"KTable operators"): the regrouping node sends change records ``(new, old)`` through a repartition
topic; the aggregation subtracts the old value and adds the new one (Kafka Streams'
``KTableRepartitionMap``, ``KTableAggregate``, ``KTableReduce``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from ..serde import Serde
from .base import Processor, kv_writer, user_error
from .window_aggregate import ValueAndTimestamp

__all__ = ["Change", "TableAggregateProcessor", "TableGroupByProcessor", "change_serde"]

_LEN = struct.Struct(">I")


class Change(NamedTuple):
    """A change record on a grouped table's repartition topic: the row's new and old value in one group."""

    new: Any
    old: Any


def change_serde(inner: Serde) -> Serde:
    """Serde of :class:`Change`: a flag byte (1: new present, 2: old present), the new value's length
    (4 bytes, big-endian) and bytes, then the old value's bytes, each through ``inner``."""
    where = f"grouped table change ({inner.name})"

    def to_bytes(change: Any) -> bytes:
        new, old = change
        raw_new = b"" if new is None else inner.serialize(new, where) or b""
        raw_old = b"" if old is None else inner.serialize(old, where) or b""
        flags = (0 if new is None else 1) | (0 if old is None else 2)
        return bytes((flags,)) + _LEN.pack(len(raw_new)) + raw_new + raw_old

    def from_bytes(data: bytes) -> Change:
        if len(data) < 5:
            raise ValueError(f"expected at least 5 bytes (flags + length), got {len(data)}")
        flags = data[0]
        n = _LEN.unpack_from(data, 1)[0]
        new = inner.deserialize(bytes(data[5:5 + n]), where) if flags & 1 else None
        old = inner.deserialize(bytes(data[5 + n:]), where) if flags & 2 else None
        return Change(new, old)

    return Serde(f"change({inner.name})", to_bytes, from_bytes)


class TableGroupByProcessor(Processor):
    """``selector(key, value) -> (new_key, new_value)`` of the row's new and old value (read from the
    parent table's ``old_value``; never called with None). A pair with a None key or value is skipped.
    Same new key for both: one ``Change(new, old)``; else ``Change(None, old)`` to the old key first,
    then ``Change(new, None)`` to the new key."""

    __slots__ = ("parent", "parent_name", "selector")

    def __init__(self, name: str, parent_name: str, selector: Callable[[Any, Any], Any]) -> None:
        super().__init__(name)
        self.parent_name = parent_name
        self.selector = selector
        self.parent: Any = None

    def init(self, task: Any) -> None:
        super().init(task)
        self.parent = task.processors[self.parent_name]

    def _select(self, key: Any, value: Any) -> tuple[Any, Any] | None:
        if value is None:
            return None
        try:
            result = self.selector(key, value)
        except Exception as exc:
            raise user_error(self.name, "selector", exc, key) from exc
        try:
            new_key, new_value = result
        except (TypeError, ValueError) as exc:
            raise user_error(self.name, "selector",
                             TypeError(f"must return a (new_key, new_value) pair, got {result!r}"), key) from exc
        if new_key is None or new_value is None:
            return None
        return new_key, new_value

    def process(self, key: Any, value: Any, ts: int) -> None:
        if key is None:
            return
        new = self._select(key, value)
        old = self._select(key, self.parent.old_value)
        if new is not None and old is not None and new[0] == old[0]:
            self.forward(old[0], Change(new[1], old[1]), ts)
            return
        if old is not None:
            self.forward(old[0], Change(None, old[1]), ts)
        if new is not None:
            self.forward(new[0], Change(new[1], None), ts)


class TableAggregateProcessor(Processor):
    """The grouped table's ``aggregate(initializer, adder, subtractor)`` (``reduce=False``:
    ``adder(key, value, agg)``) or ``reduce(adder, subtractor)`` (``reduce=True``: ``adder(agg, value)``,
    the first value of a group is its aggregate). Per change ``(new, old)`` on ``key``:

    1. the old value is subtracted when the group has an aggregate;
    2. the new value is added (to ``initializer()`` / taken as is when there is no aggregate);
    3. timestamp ``max(ts, stored timestamp)`` when the group had an aggregate, else ``ts``;
    4. the store holds ``ValueAndTimestamp(agg, ts)`` (an aggregate of None deletes the group), and
       ``(key, agg, ts)`` is forwarded (``old_value``: the aggregate before).
    """

    __slots__ = ("_delete", "_put", "adder", "initializer", "old_value", "reduce", "store", "store_name", "subtractor")

    def __init__(self, name: str, store_name: str, initializer: Callable[[], Any] | None, adder: Callable[..., Any],
                 subtractor: Callable[..., Any], reduce: bool) -> None:
        super().__init__(name)
        self.store_name = store_name
        self.initializer = initializer
        self.adder = adder
        self.subtractor = subtractor
        self.reduce = reduce
        self.store: Any = None
        self._put: Any = None
        self._delete: Any = None
        self.old_value: Any = None

    def init(self, task: Any) -> None:
        super().init(task)
        self.store = task.stores[self.store_name]
        self._put, self._delete = kv_writer(self.store)

    def process(self, key: Any, change: Any, ts: int) -> None:
        if key is None or change is None:
            return
        new, old = change
        stored = self.store.get(key)
        agg = None if stored is None else stored.value
        self.old_value = agg
        try:
            if old is not None and agg is not None:
                agg = self.subtractor(agg, old) if self.reduce else self.subtractor(key, old, agg)
            if new is not None:
                if self.reduce:
                    agg = new if agg is None else self.adder(agg, new)
                else:
                    agg = self.adder(key, new, self.initializer() if agg is None else agg)  # type: ignore[misc]
        except Exception as exc:
            raise user_error(self.name, "aggregation function", exc, key) from exc
        if stored is not None:
            ts = max(ts, stored.timestamp)
        if agg is None:
            self._delete(key, ts)
        else:
            self._put(key, ValueAndTimestamp(agg, ts), ts)
        self.forward(key, agg, ts)
