"""KTable: a changelog stream seen as a table (latest value per key, or versions of it), and its
operators (docs/semantics.md, "KTable operators")."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..processors.stateless import PassThroughProcessor
from ..processors.table_ops import (
    FilterGetter,
    JoinGetter,
    JoinMergeProcessor,
    MapValuesGetter,
    StoreGetter,
    TableFilterProcessor,
    TableJoinSideProcessor,
    TableMapValuesProcessor,
    ValueGetter,
)
from ..processors.window_aggregate import timestamped_serde
from ..serde import Serde
from .graph import Node
from .options import check_callable as _callable

if TYPE_CHECKING:  # pragma: no cover
    from .builder import StreamsBuilder
    from .kgrouped_table import KGroupedTable
    from .kstream import KStream

__all__ = ["KTable"]


@dataclasses.dataclass
class TableState:
    """Build-time facts of a table node, read when tasks make its processor: whether it sends old
    values (a downstream left/outer join or group_by asked), whether a table source's store holds
    timestamps (a table-table join asked), and the table it is computed from (None: materialised)."""

    send_old_values: bool = False
    timestamped_store: bool = False
    parents: tuple[KTable, ...] = ()

class KTable:
    """A table: from :meth:`StreamsBuilder.table`, the result of a grouped stream's ``count``/
    ``reduce``/``aggregate`` (``timestamped=True``: its store holds ``ValueAndTimestamp``), or of a
    windowed aggregation (``windowed=True``: keys are :class:`~streamproc.records.Windowed`).

    ``store_name`` is its store (also the changelog name); ``history_retention_ms`` is set for
    versioned tables.
    """

    __slots__ = ("_builder", "_getter", "_node", "_state", "history_retention_ms", "key_serde", "store_name",
                 "timestamped", "value_serde", "windowed")

    def __init__(self, builder: StreamsBuilder, node: Node, store_name: str, key_serde: Serde | None,
                 value_serde: Serde | None, history_retention_ms: int | None, windowed: bool, timestamped: bool = False,
                 state: TableState | None = None, getter: Callable[[], ValueGetter] | None = None) -> None:
        self._builder = builder
        self._node = node
        self.store_name = store_name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.history_retention_ms = history_retention_ms
        self.windowed = windowed
        #: the store holds ``ValueAndTimestamp`` (a stream aggregation's table)
        self.timestamped = timestamped
        self._state = state or TableState()
        #: how a task reads the table's current value (None: the table's own store)
        self._getter = getter

    @property
    def name(self) -> str:
        """The table's name (its store's name)."""
        return self.store_name

    @property
    def materialized(self) -> bool:
        """Whether the table has its own store (table sources, aggregations); ``filter``,
        ``map_values`` and join results are computed from their parents' stores."""
        return not self._state.parents

    @property
    def versioned(self) -> bool:
        return self.history_retention_ms is not None

    def queryable_store_name(self) -> str:
        return self.store_name

    def to_stream(self, name: str | None = None) -> KStream:
        """The stream of the table's updates: ``(key, new_value)`` (None for deletes and merged-away
        sessions). A versioned table forwards only updates that became the newest version."""
        from .kstream import KStream

        b = self._builder
        node_name = b._new_name(name, "KTABLE-TOSTREAM", "to_stream()")
        node = b._add_node(node_name, "processor", "to_stream", lambda: PassThroughProcessor(node_name),
                           parents=[self._node])
        return KStream(b, node, None if self.windowed else self.key_serde, self.value_serde, False)

    # -- table operators -------------------------------------------------------------------------------
    def filter(self, predicate: Callable[[Any, Any], Any], name: str | None = None) -> KTable:
        """The rows for which ``predicate(key, value)`` is true; a row that stops passing is deleted
        (a ``None`` tombstone is forwarded). ``predicate`` never sees a deleted row."""
        return self._filter(predicate, name, False, "filter")

    def filter_not(self, predicate: Callable[[Any, Any], Any], name: str | None = None) -> KTable:
        """The rows for which ``predicate(key, value)`` is false (see :meth:`filter`)."""
        return self._filter(predicate, name, True, "filter_not")

    def map_values(self, mapper: Callable[[Any], Any], name: str | None = None) -> KTable:
        """``mapper(value)`` of every row (a deleted row stays deleted; ``mapper`` never sees None)."""
        self._check_operand("map_values")
        fn = _callable(mapper, "mapper", "map_values")
        parent = self._node.name
        return self._derived(name, "KTABLE-MAPVALUES", "map_values",
                             lambda n, st: TableMapValuesProcessor(n, parent, fn, st.send_old_values),
                             lambda n: MapValuesGetter(n, self._value_getter(), fn), None)

    def join(self, other: KTable, joiner: Callable[[Any, Any], Any], name: str | None = None) -> KTable:
        """Inner join with the co-partitioned table ``other``: ``joiner(this_value, other_value)`` for
        every key both tables have; a row leaves the result (tombstone) when it leaves this table."""
        return self._table_join(other, joiner, name, "join", False, False)

    def left_join(self, other: KTable, joiner: Callable[[Any, Any], Any], name: str | None = None) -> KTable:
        """Every row of this table, ``joiner(this_value, other_value or None)``."""
        return self._table_join(other, joiner, name, "left_join", True, False)

    def outer_join(self, other: KTable, joiner: Callable[[Any, Any], Any], name: str | None = None) -> KTable:
        """Every key of either table, ``joiner(this_value or None, other_value or None)``."""
        return self._table_join(other, joiner, name, "outer_join", True, True)

    def group_by(self, selector: Callable[[Any, Any], Any], name: str | None = None, key_serde: Any = None,
                 value_serde: Any = None) -> KGroupedTable:
        """Regroup the rows: ``selector(key, value) -> (new_key, new_value)``; the aggregations of the
        returned :class:`KGroupedTable` add a row's new pair and subtract its old one (through the
        repartition topic ``<application_id>-<name>-repartition``)."""
        from .kgrouped_table import KGroupedTable

        self._check_operand("group_by")
        return KGroupedTable(self, _callable(selector, "selector", "group_by"), name, key_serde, value_serde)

    # -- internals ---------------------------------------------------------------------------------
    def _check_operand(self, op: str) -> None:
        if self.windowed:
            raise ValueError(f"{op}() on the windowed table {self.name!r} is not supported; turn it into a stream "
                             f"with to_stream() and use the stream operators")

    def _enable_send_old_values(self) -> None:
        """Downstream needs each update's previous value (Kafka Streams' ``enableSendingOldValues``)."""
        self._state.send_old_values = True
        for parent in self._state.parents:
            parent._enable_send_old_values()

    def _value_getter(self) -> ValueGetter:
        """How a task reads this table's current ``(value, timestamp)``. A key-value table source's
        store then keeps timestamps (``ValueAndTimestamp``, as Kafka Streams' table stores)."""
        if self._getter is not None:
            return self._getter()
        if not (self.versioned or self.timestamped):
            b = self._builder
            spec = b._stores[self.store_name]
            b._stores[self.store_name] = dataclasses.replace(spec, value_serde=timestamped_serde(spec.value_serde))
            self.timestamped = True
            self._state.timestamped_store = True
        return StoreGetter(self.store_name)

    def _filter(self, predicate: Callable[[Any, Any], Any], name: str | None, negate: bool, op: str) -> KTable:
        self._check_operand(op)
        fn = _callable(predicate, "predicate", op)
        parent = self._node.name
        return self._derived(name, "KTABLE-FILTER", op,
                             lambda n, st: TableFilterProcessor(n, parent, fn, negate, st.send_old_values),
                             lambda n: FilterGetter(n, self._value_getter(), fn, negate), self.value_serde)

    def _derived(self, name: str | None, prefix: str, op: str, make: Callable[[str, TableState], Any],
                 getter: Callable[[str], ValueGetter], value_serde: Serde | None) -> KTable:
        b = self._builder
        node_name = b._new_name(name, prefix, f"{op}()")
        state = TableState(parents=(self,))
        node = b._add_node(node_name, "processor", f"table-{op}", lambda: make(node_name, state), parents=[self._node])
        return KTable(b, node, store_name=node_name, key_serde=self.key_serde, value_serde=value_serde,
                      history_retention_ms=None, windowed=False, state=state, getter=lambda: getter(node_name))

    def _table_join(self, other: Any, joiner: Callable[[Any, Any], Any], name: str | None, op: str,
                    left_outer: bool, right_outer: bool) -> KTable:
        if not isinstance(other, KTable) or other._builder is not self._builder:
            raise ValueError(f"{op}() of table {self.name!r} needs another KTable of the same StreamsBuilder, "
                             f"got {other!r}")
        self._check_operand(op)
        other._check_operand(op)
        fn = _callable(joiner, "joiner", op)
        b = self._builder
        prefix = {"join": "KTABLE-JOIN", "left_join": "KTABLE-LEFTJOIN", "outer_join": "KTABLE-OUTERJOIN"}[op]
        merge_name = b._new_name(name, prefix, f"{op}()")
        this_name = b._new_name(f"{merge_name}-join-this", "", f"{op}() (this side)")
        other_name = b._new_name(f"{merge_name}-join-other", "", f"{op}() (other side)")
        if left_outer:
            self._enable_send_old_values()
        if right_outer:
            other._enable_send_old_values()
        this_getter, other_getter = self._value_getter(), other._value_getter()
        state = TableState(parents=(self, other))
        this_parent, other_parent = self._node.name, other._node.name
        this_node = b._add_node(
            this_name, "processor", f"table-{op} (this)",
            lambda: TableJoinSideProcessor(this_name, this_parent, merge_name, other_getter, fn, False, left_outer,
                                           right_outer, state.send_old_values),
            parents=[self._node])
        other_node = b._add_node(
            other_name, "processor", f"table-{op} (other)",
            lambda: TableJoinSideProcessor(other_name, other_parent, merge_name, this_getter, fn, True, right_outer,
                                           left_outer, state.send_old_values),
            parents=[other._node])
        merge = b._add_node(merge_name, "processor", f"table-{op}", lambda: JoinMergeProcessor(merge_name),
                            parents=[this_node, other_node])
        kind = "outer" if right_outer else ("left" if left_outer else "inner")
        return KTable(b, merge, store_name=merge_name, key_serde=self.key_serde, value_serde=None,
                      history_retention_ms=None, windowed=False, state=state,
                      getter=lambda: JoinGetter(merge_name, this_getter, other_getter, fn, kind))

    def __repr__(self) -> str:
        kind = "windowed" if self.windowed else ("versioned" if self.versioned else "key-value")
        return f"KTable({self.store_name!r}, {kind})"
