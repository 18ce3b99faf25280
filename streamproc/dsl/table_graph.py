"""How the DSL records tables and their operators (docs/semantics.md, "KTable operators").

A :class:`TableFlow` is a table at one point of the graph: the node that forwards its updates, its
store (or, for a table computed from others, how a task reads its current value), its serdes and
kind. The functions here add table operators (``filter``, ``map_values``, table-table joins,
``to_stream``) to a :class:`~streamproc.dsl.graph_builder.GraphBuilder` and return the resulting
flow; :class:`~streamproc.dsl.streams.KTable` is the public face of a :class:`TableFlow`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

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
from .graph_builder import Flow, GraphBuilder

__all__ = ["TableFlow", "TableState", "derived_table", "table_filter", "table_join", "table_map_values",
           "table_to_stream"]

_JOIN_PREFIX = {"join": "KTABLE-JOIN", "left_join": "KTABLE-LEFTJOIN", "outer_join": "KTABLE-OUTERJOIN"}


@dataclasses.dataclass
class TableState:
    """Build-time facts of a table node, read when tasks make its processor: whether it sends old
    values (a downstream left/outer join or group_by asked), whether a table source's store holds
    timestamps (a table-table join asked), and the tables it is computed from (empty: materialised)."""

    send_old_values: bool = False
    timestamped_store: bool = False
    parents: tuple[TableFlow, ...] = ()


@dataclasses.dataclass(eq=False)
class TableFlow:
    """A table: from a table source, a grouped stream's ``count``/``reduce``/``aggregate``
    (``timestamped``: its store holds ``ValueAndTimestamp``), a windowed aggregation (``windowed``:
    keys are :class:`~streamproc.records.Windowed`) or a table operator.

    ``store_name`` is its store (and changelog) name, or the operator's name for a table computed
    from its parents; ``history_retention_ms`` is set for versioned tables; ``getter`` (None: the
    table's own store) makes what a task reads the current value with.
    """

    node: Node
    store_name: str
    key_serde: Serde | None
    value_serde: Serde | None
    history_retention_ms: int | None = None
    windowed: bool = False
    timestamped: bool = False
    state: TableState = dataclasses.field(default_factory=TableState)
    getter: Callable[[], ValueGetter] | None = None
    #: how errors name the table to its user ("table 'rates'", from the topic or name they gave)
    label: str = ""

    @property
    def description(self) -> str:
        """The table as its user knows it: its label, else ``table '<store name>'``."""
        return self.label or f"table {self.store_name!r}"

    @property
    def materialized(self) -> bool:
        """Whether the table has its own store (table sources, aggregations)."""
        return not self.state.parents

    @property
    def versioned(self) -> bool:
        return self.history_retention_ms is not None

    def check_operand(self, op: str) -> None:
        """A ``ValueError`` when table operator ``op`` cannot apply to this table (a windowed one)."""
        if self.windowed:
            raise ValueError(f"{op}() on the windowed {self.description} is not supported; turn it into a "
                             f"stream with to_stream() and use the stream operators")

    def enable_send_old_values(self) -> None:
        """Downstream needs each update's previous value (Kafka Streams' ``enableSendingOldValues``);
        the tables this one is computed from then send theirs too."""
        self.state.send_old_values = True
        for parent in self.state.parents:
            parent.enable_send_old_values()

    def value_getter(self, graph: GraphBuilder) -> ValueGetter:
        """How a task reads this table's current ``(value, timestamp)``. A key-value table source's
        store then keeps timestamps (``ValueAndTimestamp``, as Kafka Streams' table stores)."""
        if self.getter is not None:
            return self.getter()
        if not (self.versioned or self.timestamped):
            spec = graph.store(self.store_name)
            if spec is not None:
                graph.change_store(self.store_name, value_serde=timestamped_serde(spec.value_serde))
            self.timestamped = True
            self.state.timestamped_store = True
        return StoreGetter(self.store_name)


def table_to_stream(graph: GraphBuilder, table: TableFlow, name: str | None) -> Flow:
    """The stream of the table's updates: ``(key, new_value)`` (None for deletes)."""
    node_name = graph.new_name(name, "KTABLE-TOSTREAM", "to_stream()")
    node = graph.add_node(node_name, "processor", "to_stream", lambda: PassThroughProcessor(node_name),
                          parents=[table.node])
    return Flow(node, None if table.windowed else table.key_serde, table.value_serde, False)


def derived_table(graph: GraphBuilder, table: TableFlow, name: str | None, prefix: str, op: str,
                  make: Callable[[str, str, TableState], Any],
                  getter: Callable[[str, ValueGetter], ValueGetter], value_serde: Serde | None) -> TableFlow:
    """A table computed row by row from ``table`` (``filter``, ``map_values``): its processor is
    ``make(node_name, parent_name, state)``; a task reads its value with ``getter(node_name, the
    parent's getter)``. ``table`` must be a table operators apply to (:meth:`TableFlow.check_operand`)."""
    node_name = graph.new_name(name, prefix, f"{op}()")
    state = TableState(parents=(table,))
    parent = table.node.name
    node = graph.add_node(node_name, "processor", f"table-{op}", lambda: make(node_name, parent, state),
                          parents=[table.node])
    return TableFlow(node, store_name=node_name, key_serde=table.key_serde, value_serde=value_serde, state=state,
                     getter=lambda: getter(node_name, table.value_getter(graph)))


def table_filter(graph: GraphBuilder, table: TableFlow, predicate: Callable[[Any, Any], Any], name: str | None,
                 negate: bool, op: str) -> TableFlow:
    """The rows for which ``predicate`` holds (fails, with ``negate``); a row that stops passing is deleted."""
    return derived_table(
        graph, table, name, "KTABLE-FILTER", op,
        lambda n, parent, st: TableFilterProcessor(n, parent, predicate, negate, st.send_old_values),
        lambda n, parent_getter: FilterGetter(n, parent_getter, predicate, negate), table.value_serde)


def table_map_values(graph: GraphBuilder, table: TableFlow, mapper: Callable[[Any], Any],
                     name: str | None) -> TableFlow:
    """``mapper(value)`` of every row (a deleted row stays deleted)."""
    return derived_table(
        graph, table, name, "KTABLE-MAPVALUES", "map_values",
        lambda n, parent, st: TableMapValuesProcessor(n, parent, mapper, st.send_old_values),
        lambda n, parent_getter: MapValuesGetter(n, parent_getter, mapper), None)


def table_join(graph: GraphBuilder, this: TableFlow, other: TableFlow, joiner: Callable[[Any, Any], Any],
               name: str | None, op: str) -> TableFlow:
    """``this`` ``op`` (``join``, ``left_join``, ``outer_join``) ``other``, co-partitioned tables:
    each side's update looks the other side up; a merge node forwards both sides' results. Both
    must be tables operators apply to (:meth:`TableFlow.check_operand`)."""
    left_outer, right_outer = op in ("left_join", "outer_join"), op == "outer_join"
    merge_name = graph.new_name(name, _JOIN_PREFIX[op], f"{op}()")
    this_name = graph.new_name(f"{merge_name}-join-this", "", f"{op}() (this side)")
    other_name = graph.new_name(f"{merge_name}-join-other", "", f"{op}() (other side)")
    if left_outer:
        this.enable_send_old_values()
    if right_outer:
        other.enable_send_old_values()
    this_getter, other_getter = this.value_getter(graph), other.value_getter(graph)
    state = TableState(parents=(this, other))
    this_parent, other_parent = this.node.name, other.node.name
    this_node = graph.add_node(
        this_name, "processor", f"table-{op} (this)",
        lambda: TableJoinSideProcessor(this_name, this_parent, merge_name, other_getter, joiner, False, left_outer,
                                       right_outer, state.send_old_values),
        parents=[this.node])
    other_node = graph.add_node(
        other_name, "processor", f"table-{op} (other)",
        lambda: TableJoinSideProcessor(other_name, other_parent, merge_name, this_getter, joiner, True, right_outer,
                                       left_outer, state.send_old_values),
        parents=[other.node])
    merge = graph.add_node(merge_name, "processor", f"table-{op}", lambda: JoinMergeProcessor(merge_name),
                           parents=[this_node, other_node])
    kind = "outer" if right_outer else ("left" if left_outer else "inner")
    return TableFlow(merge, store_name=merge_name, key_serde=this.key_serde, value_serde=None, state=state,
                     getter=lambda: JoinGetter(merge_name, this_getter, other_getter, joiner, kind))
