"""KGroupedTable: a table regrouped by ``KTable.group_by(selector)`` and its aggregations
(docs/semantics.md, "KTable operators").

``table.group_by(lambda k, v: (v["region"], v["amount"])).reduce(add, subtract)``: each row is in
one group; an update subtracts the row's old pair from its old group and adds its new pair to its
new group (one change record when the group is the same). The rows travel through the repartition
topic ``<application_id>-<name>-repartition`` as change records ``(new, old)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..processors.io import SinkProcessor, SourceProcessor
from ..processors.table_aggregate import TableAggregateProcessor, TableGroupByProcessor, change_serde
from ..processors.window_aggregate import timestamped_serde
from ..serde import INT, Serde
from .graph import StoreSpec
from .options import Materialized, check_serde
from .options import check_callable as _callable

if TYPE_CHECKING:  # pragma: no cover
    from .ktable import KTable

__all__ = ["KGroupedTable"]


class KGroupedTable:
    """From :meth:`KTable.group_by`; ``count``/``reduce``/``aggregate`` return a :class:`KTable`."""

    __slots__ = ("_key_serde", "_name", "_selector", "_table", "_value_serde")

    def __init__(self, table: KTable, selector: Callable[[Any, Any], Any], name: str | None, key_serde: Any,
                 value_serde: Any) -> None:
        self._table = table
        self._selector = selector
        self._name = name
        self._key_serde = check_serde(key_serde, "key_serde", "group_by()")
        self._value_serde = check_serde(value_serde, "value_serde", "group_by()")

    def count(self, name: str | None = None, materialized: Materialized | None = None) -> KTable:
        """Rows per group (a group whose rows all left counts 0, as Kafka Streams)."""
        return self._build("count", lambda: 0, lambda k, v, agg: agg + 1, lambda k, v, agg: agg - 1, False, name,
                           materialized, None, INT)

    def reduce(self, adder: Callable[[Any, Any], Any], subtractor: Callable[[Any, Any], Any],
               name: str | None = None, materialized: Materialized | None = None, value_serde: Any = None) -> KTable:
        """``adder(agg, value)`` for a row joining the group (the first row's value starts it),
        ``subtractor(agg, value)`` for a row leaving it."""
        return self._build("reduce", None, _callable(adder, "adder", "reduce"),
                           _callable(subtractor, "subtractor", "reduce"), True, name, materialized, value_serde,
                           self._value_serde or self._table.value_serde)

    def aggregate(self, initializer: Callable[[], Any], adder: Callable[[Any, Any, Any], Any],
                  subtractor: Callable[[Any, Any, Any], Any], name: str | None = None,
                  materialized: Materialized | None = None, value_serde: Any = None) -> KTable:
        """``initializer() -> agg`` for a new group, ``adder(key, value, agg)`` for a row joining it,
        ``subtractor(key, value, agg)`` for a row leaving it."""
        return self._build("aggregate", _callable(initializer, "initializer", "aggregate"),
                           _callable(adder, "adder", "aggregate"), _callable(subtractor, "subtractor", "aggregate"),
                           False, name, materialized, value_serde, None)

    def _build(self, op: str, initializer: Callable[[], Any] | None, adder: Callable[..., Any],
               subtractor: Callable[..., Any], reduce: bool, name: str | None, materialized: Materialized | None,
               value_serde: Any, known_value_serde: Serde | None) -> KTable:
        from .ktable import KTable

        mat = materialized or Materialized()
        if mat.retention is not None:
            raise ValueError(f"{op}() of a grouped table keeps every group: a retention ({mat.retention!r}) has no "
                             f"meaning here; drop it from the Materialized")
        table = self._table
        b = table._builder
        node_name = b._new_name(name if name is not None else mat.name, "KTABLE-AGGREGATE", f"{op}()")
        base = self._name if self._name is not None else node_name
        select_name = b._new_name(f"{base}-select", "", "group_by()")
        topic = f"{base}-repartition"
        ks = b._serde(f"key of repartition topic {topic!r}", self._key_serde, check_serde(mat.key_serde, "key_serde", op))
        vs_in = b._serde(f"value of repartition topic {topic!r}", self._value_serde)
        vs = b._serde(f"value of key-value store {node_name!r}", check_serde(value_serde, "value_serde", f"{op}()"),
                      check_serde(mat.value_serde, "value_serde", op), known_value_serde)
        changes = change_serde(vs_in)
        table._enable_send_old_values()
        parent, selector = table._node.name, self._selector
        select = b._add_node(select_name, "processor", "table-group-by",
                             lambda: TableGroupByProcessor(select_name, parent, selector), parents=[table._node])
        sink_name = b._new_name(f"{topic}-sink", "", "repartition sink")
        b._add_node(sink_name, "sink", "repartition-sink",
                    lambda: SinkProcessor(sink_name, topic, ks, changes, internal=True),
                    parents=[select], topics=(topic,), internal=True, key_serde=ks, value_serde=changes)
        source_name = b._new_name(f"{topic}-source", "", "repartition source")
        source = b._add_node(source_name, "source", "repartition-source",
                             lambda: SourceProcessor(source_name, (topic,), ks, changes, internal=True),
                             topics=(topic,), internal=True, key_serde=ks, value_serde=changes)
        b._add_store(StoreSpec(name=node_name, kind="key_value", owner=node_name, key_serde=ks,
                               value_serde=timestamped_serde(vs), logging=mat.logging))
        node = b._add_node(node_name, "processor", f"table-{op}",
                           lambda: TableAggregateProcessor(node_name, node_name, initializer, adder, subtractor,
                                                           reduce),
                           parents=[source], stores=(node_name,))
        return KTable(b, node, store_name=node_name, key_serde=ks, value_serde=vs, history_retention_ms=None,
                      windowed=False, timestamped=True)

    def __repr__(self) -> str:
        return f"KGroupedTable({self._table.name!r})"
