"""KTable operators: filter, map_values, table-table joins (docs/semantics.md, "KTable operators").

The change protocol between table nodes. A table node forwards ``(key, new_value, ts)`` (``None``:
the key is deleted) and, while it forwards, its ``old_value`` attribute holds the key's value before
this update when the node was asked for old values (``send_old_values``, set at build time by a
downstream left/outer join or ``group_by``, as Kafka Streams' ``enableSendingOldValues``), else
None. A child reads it from its parent processor (``task.processors[parent]``).

Value getters. A table's current ``(value, timestamp)`` for a key comes from a
:class:`ValueGetter`: a materialised table reads its store (``ValueAndTimestamp`` or a versioned
store's newest version); ``filter``/``map_values`` results are not materialised and compute the
value on the fly from their parent's getter (Kafka Streams' unmaterialised ``KTableFilter``/
``KTableMapValues``); a join result combines its two sides' getters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .base import Processor, user_error

__all__ = [
    "FilterGetter",
    "JoinGetter",
    "JoinMergeProcessor",
    "MapValuesGetter",
    "StoreGetter",
    "TableFilterProcessor",
    "TableJoinSideProcessor",
    "TableMapValuesProcessor",
    "ValueGetter",
]

Lookup = Callable[[Any], "tuple[Any, int] | None"]


class ValueGetter(Protocol):
    """How a table's current rows are read in a task."""

    def bind(self, task: Any) -> Lookup:
        """``lookup(key) -> (value, timestamp)``, or None when the table has no row for ``key``,
        reading ``task``'s stores."""


class StoreGetter:
    """A materialised table's store: ``ValueAndTimestamp`` or a versioned store's ``VersionedRecord``."""

    __slots__ = ("store_name",)

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def bind(self, task: Any) -> Lookup:
        get = task.stores[self.store_name].get

        def lookup(key: Any) -> tuple[Any, int] | None:
            found = get(key)
            if found is None or found.value is None:
                return None
            return found.value, found.timestamp

        return lookup


def _filtered(name: str, predicate: Callable[[Any, Any], Any], negate: bool, key: Any, value: Any) -> Any:
    if value is None:
        return None
    try:
        keep = predicate(key, value)
    except Exception as exc:
        raise user_error(name, "predicate", exc, key) from exc
    return value if bool(keep) is not negate else None


def _mapped(name: str, mapper: Callable[[Any], Any], key: Any, value: Any) -> Any:
    if value is None:
        return None
    try:
        return mapper(value)
    except Exception as exc:
        raise user_error(name, "mapper", exc, key) from exc


class FilterGetter:
    """The parent's row when it passes ``predicate(key, value)`` (fails, with ``negate``)."""

    __slots__ = ("name", "negate", "parent", "predicate")

    def __init__(self, name: str, parent: ValueGetter, predicate: Callable[[Any, Any], Any], negate: bool) -> None:
        self.name, self.parent, self.predicate, self.negate = name, parent, predicate, negate

    def bind(self, task: Any) -> Lookup:
        parent = self.parent.bind(task)

        def lookup(key: Any) -> tuple[Any, int] | None:
            found = parent(key)
            if found is None or _filtered(self.name, self.predicate, self.negate, key, found[0]) is None:
                return None
            return found

        return lookup


class MapValuesGetter:
    """The parent's row with ``mapper(value)``, its timestamp kept."""

    __slots__ = ("mapper", "name", "parent")

    def __init__(self, name: str, parent: ValueGetter, mapper: Callable[[Any], Any]) -> None:
        self.name, self.parent, self.mapper = name, parent, mapper

    def bind(self, task: Any) -> Lookup:
        parent = self.parent.bind(task)

        def lookup(key: Any) -> tuple[Any, int] | None:
            found = parent(key)
            if found is None:
                return None
            value = _mapped(self.name, self.mapper, key, found[0])
            return None if value is None else (value, found[1])

        return lookup


class JoinGetter:
    """The current value of a join result: inner needs both sides, left the left side, outer either."""

    __slots__ = ("joiner", "kind", "left", "name", "right")

    def __init__(self, name: str, left: ValueGetter, right: ValueGetter, joiner: Callable[[Any, Any], Any],
                 kind: str) -> None:
        self.name, self.left, self.right, self.joiner, self.kind = name, left, right, joiner, kind

    def bind(self, task: Any) -> Lookup:
        left, right = self.left.bind(task), self.right.bind(task)

        def lookup(key: Any) -> tuple[Any, int] | None:
            lv, rv = left(key), right(key)
            if lv is None and (self.kind != "outer" or rv is None):
                return None
            if rv is None and self.kind == "inner":
                return None
            try:
                joined = self.joiner(None if lv is None else lv[0], None if rv is None else rv[0])
            except Exception as exc:
                raise user_error(self.name, "joiner", exc, key) from exc
            ts = max(-1 if lv is None else lv[1], -1 if rv is None else rv[1])
            return None if joined is None else (joined, ts)

        return lookup


class _TableChild(Processor):
    """A table node fed by another table node ``parent`` (whose ``old_value`` it reads)."""

    __slots__ = ("old_value", "parent", "parent_name", "send_old_values")

    def __init__(self, name: str, parent_name: str, send_old_values: bool) -> None:
        super().__init__(name)
        self.parent_name = parent_name
        self.send_old_values = send_old_values
        self.parent: Any = None
        self.old_value: Any = None

    def init(self, task: Any) -> None:
        super().init(task)
        self.parent = task.processors[self.parent_name]


class TableFilterProcessor(_TableChild):
    """``KTable.filter``/``filter_not``: a row that does not pass (or a deleted row) becomes a
    tombstone. As Kafka Streams' ``KTableFilter``: without old values every update is forwarded, a
    non-passing one as ``(key, None)``; with old values an update that was and stays absent is not
    forwarded."""

    __slots__ = ("negate", "predicate")

    def __init__(self, name: str, parent_name: str, predicate: Callable[[Any, Any], Any], negate: bool,
                 send_old_values: bool) -> None:
        super().__init__(name, parent_name, send_old_values)
        self.predicate = predicate
        self.negate = negate

    def process(self, key: Any, value: Any, ts: int) -> None:
        new = _filtered(self.name, self.predicate, self.negate, key, value)
        old = None
        if self.send_old_values:
            old = _filtered(self.name, self.predicate, self.negate, key, self.parent.old_value)
            if old is None and new is None:
                return
        self.old_value = old
        self.forward(key, new, ts)


class TableMapValuesProcessor(_TableChild):
    """``KTable.map_values``: ``mapper(value)`` of every non-None value; a tombstone stays one."""

    __slots__ = ("mapper",)

    def __init__(self, name: str, parent_name: str, mapper: Callable[[Any], Any], send_old_values: bool) -> None:
        super().__init__(name, parent_name, send_old_values)
        self.mapper = mapper

    def process(self, key: Any, value: Any, ts: int) -> None:
        new = _mapped(self.name, self.mapper, key, value)
        self.old_value = _mapped(self.name, self.mapper, key, self.parent.old_value) if self.send_old_values else None
        self.forward(key, new, ts)


class JoinMergeProcessor(Processor):
    """The join result node: both sides forward through it; a side sets its ``old_value`` first."""

    __slots__ = ("old_value",)

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.old_value: Any = None


class TableJoinSideProcessor(_TableChild):
    """One side of ``KTable.join``/``left_join``/``outer_join`` (Kafka Streams'
    ``KTableKTableInnerJoin``/``LeftJoin``/``RightJoin``/``OuterJoin``). An update ``(key, new, ts)``
    of this side with the other side's current ``(other, other_ts)``:

    - ``this_outer`` False (inner; the right side of a left join): nothing when ``other`` is None;
      else ``joiner(new, other)`` (None for a deleted row when this is the left of an inner join)
      at ``max(ts, other_ts)``;
    - ``this_outer`` True (the left of a left join; both sides of an outer join): when ``other`` is
      None and the update's new and old values are both None, nothing; else ``joiner(new, other)``
      (None when both are None) at ``max(ts, other_ts)`` (``ts`` without ``other``).

    ``joiner`` is always called ``(left value, right value)``; ``reverse`` marks the right side.
    """

    __slots__ = ("_other", "joiner", "merge", "merge_name", "other_getter", "other_outer", "reverse", "this_outer")

    def __init__(self, name: str, parent_name: str, merge_name: str, other: ValueGetter,
                 joiner: Callable[[Any, Any], Any], reverse: bool, this_outer: bool, other_outer: bool,
                 send_old_values: bool) -> None:
        super().__init__(name, parent_name, send_old_values)
        self.merge_name = merge_name
        self.other_getter = other
        self.joiner = joiner
        self.reverse = reverse
        self.this_outer = this_outer
        self.other_outer = other_outer
        self.merge: Any = None
        self._other: Any = None

    def init(self, task: Any) -> None:
        super().init(task)
        self.merge = task.processors[self.merge_name]
        self._other = self.other_getter.bind(task)

    def _joined(self, key: Any, this: Any, other: Any) -> Any:
        if this is None and (other is None or not self.other_outer):
            return None
        try:
            return self.joiner(other, this) if self.reverse else self.joiner(this, other)
        except Exception as exc:
            raise user_error(self.merge_name, "joiner", exc, key) from exc

    def process(self, key: Any, value: Any, ts: int) -> None:
        if key is None:
            return
        found = self._other(key)
        old = self.parent.old_value
        if found is None:
            if not self.this_outer or (value is None and old is None):
                return
            other = None
        else:
            other, other_ts = found
            ts = max(ts, other_ts)
        new = self._joined(key, value, other)
        self.merge.old_value = self._joined(key, old, other) if self.send_old_values else None
        self.forward(key, new, ts)
